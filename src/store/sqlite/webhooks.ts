/**
 * Webhooks and their outbox on bun:sqlite (see sql/0007_webhooks.sql). One process writes the
 * file, so a claim is a plain UPDATE inside an IMMEDIATE transaction.
 */
import type { Database } from 'bun:sqlite'
import { newId, webhookEventOf, type WebhookEventType } from '../../domain.ts'
import type { DeliveryResult, WebhookRecord } from '../store.ts'
import {
  deliveryResultColumns,
  rowToClaimed,
  rowToDelivery,
  rowToWebhook,
} from '../webhook-rows.ts'

type Row = Record<string, any>

const q = (db: Database, sql: string) => db.query<Row, any[]>(sql)

/**
 * Called in the transaction that gives a batch its terminal status: one delivery per webhook of
 * the account that asks for the event, all with the same event id.
 */
export function enqueueWebhookEvents(
  db: Database,
  batch: { id: string; accountId: string; status: Parameters<typeof webhookEventOf>[0] },
  at: number,
) {
  const type: WebhookEventType = webhookEventOf(batch.status)
  q(
    db,
    `INSERT OR IGNORE INTO webhook_deliveries
       (webhook_id, event_id, event_type, batch_id, created_at, status, attempts, next_attempt_at)
     SELECT w.id, ?, ?, ?, ?, 'pending', 0, ?
     FROM webhooks w WHERE w.account_id = ? AND EXISTS (SELECT 1 FROM json_each(w.events) WHERE value = ?)`,
  ).run(newId('evt_'), type, batch.id, at, at * 1000, batch.accountId, type)
}

export function createWebhook(db: Database, webhook: WebhookRecord, maxPerAccount: number) {
  return db
    .transaction(() => {
      const { n } = q(db, 'SELECT count(*) AS n FROM webhooks WHERE account_id = ?').get(
        webhook.accountId,
      )!
      if (n >= maxPerAccount) return false
      q(
        db,
        `INSERT INTO webhooks (id, account_id, url, events, secret, created_at)
         VALUES (?, ?, ?, ?, ?, ?)`,
      ).run(
        webhook.id,
        webhook.accountId,
        webhook.url,
        JSON.stringify(webhook.events),
        webhook.secret,
        webhook.createdAt,
      )
      return true
    })
    .immediate()
}

export function listWebhooks(db: Database, accountId: string) {
  return q(db, 'SELECT * FROM webhooks WHERE account_id = ? ORDER BY id DESC')
    .all(accountId)
    .map(rowToWebhook)
}

export function deleteWebhook(db: Database, accountId: string, id: string) {
  return db
    .transaction(() => {
      const gone = q(db, 'DELETE FROM webhooks WHERE id = ? AND account_id = ?').run(id, accountId)
      if (gone.changes === 0) return false
      q(db, 'DELETE FROM webhook_deliveries WHERE webhook_id = ?').run(id)
      return true
    })
    .immediate()
}

export function listDeliveries(
  db: Database,
  accountId: string,
  webhookId: string,
  page: { limit: number; after: string | null },
) {
  const own = q(db, 'SELECT 1 FROM webhooks WHERE id = ? AND account_id = ?').get(
    webhookId,
    accountId,
  )
  if (!own) return null
  const rows = q(
    db,
    `SELECT * FROM webhook_deliveries WHERE webhook_id = ? AND event_id < ?
     ORDER BY event_id DESC LIMIT ?`,
  ).all(webhookId, page.after ?? '\u{10ffff}', page.limit + 1)
  return {
    deliveries: rows.slice(0, page.limit).map(rowToDelivery),
    hasMore: rows.length > page.limit,
  }
}

export function claimDeliveries(
  db: Database,
  owner: string,
  limit: number,
  nowMs: number,
  leaseUntilMs: number,
) {
  // The deliverer asks every poll interval; most of the time nothing is due. A plain read (no
  // lock) answers that, so the poll only takes the write lock (BEGIN IMMEDIATE, which waits on
  // the dispatcher's outcome writes and stalls the event loop) when there is something to claim.
  if (
    !q(
      db,
      `SELECT 1 FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ? LIMIT 1`,
    ).get(nowMs)
  ) {
    return []
  }
  return db
    .transaction(() => {
      const due = q(
        db,
        `SELECT d.webhook_id, d.event_id FROM webhook_deliveries d
         JOIN webhooks w ON w.id = d.webhook_id
         WHERE d.status = 'pending' AND d.next_attempt_at <= ?
         ORDER BY d.next_attempt_at LIMIT ?`,
      ).all(nowMs, limit)
      const claim = q(
        db,
        `UPDATE webhook_deliveries SET lease_owner = ?, next_attempt_at = ?,
           attempts = attempts + 1, last_attempt_at = ?
         WHERE webhook_id = ? AND event_id = ?`,
      )
      const read = q(
        db,
        `SELECT d.*, w.url, w.secret FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
         WHERE d.webhook_id = ? AND d.event_id = ?`,
      )
      return due.map((row) => {
        claim.run(owner, leaseUntilMs, Math.floor(nowMs / 1000), row.webhook_id, row.event_id)
        return rowToClaimed(read.get(row.webhook_id, row.event_id)!)
      })
    })
    .immediate()
}

export function finishDelivery(
  db: Database,
  owner: string,
  delivery: { webhookId: string; eventId: string },
  result: DeliveryResult,
  nowMs: number,
) {
  const { status, nextAttemptAtMs, error, deliveredAt } = deliveryResultColumns(result, nowMs)
  return (
    q(
      db,
      `UPDATE webhook_deliveries SET status = ?, next_attempt_at = ?, lease_owner = NULL,
         last_status_code = ?, last_error = ?, delivered_at = ?
       WHERE webhook_id = ? AND event_id = ? AND lease_owner = ? AND status = 'pending'`,
    ).run(
      status,
      nextAttemptAtMs,
      result.statusCode,
      error,
      deliveredAt,
      delivery.webhookId,
      delivery.eventId,
      owner,
    ).changes > 0
  )
}

export function releaseDeliveries(db: Database, owner: string, nowMs: number) {
  return q(
    db,
    `UPDATE webhook_deliveries SET lease_owner = NULL, next_attempt_at = ?,
       attempts = max(0, attempts - 1)
     WHERE lease_owner = ? AND status = 'pending'`,
  ).run(nowMs, owner).changes
}
