/**
 * Webhooks and their outbox on bun:sqlite (see sql/0007_webhooks.sql and 0012). One process
 * writes the file, so a claim is plain reads and UPDATEs inside an IMMEDIATE transaction: nothing
 * else claims between its count of a webhook's live leases and its own.
 */
import { newId, webhookEventOf, type WebhookEventType } from '../../domain.ts'
import { sqliteQuery as q, type Row, type SqliteConnection } from '../connection.ts'
import type {
  DeliveryClaim,
  DeliveryFinish,
  DeliveryResult,
  WebhookRecord,
  WebhookStore,
} from './webhook-store.ts'
import {
  deliveryResultColumns,
  DISABLE_AFTER_MS,
  MAX_IN_FLIGHT_PER_WEBHOOK,
  roundRobin,
  rowToClaimed,
  rowToDelivery,
  rowToWebhook,
} from './webhook-rows.ts'

type Database = SqliteConnection

/** The webhook store on bun:sqlite. */
export function createSqliteWebhookStore(db: SqliteConnection): WebhookStore {
  return {
    async createWebhook(webhook, maxPerAccount) {
      return createWebhook(db, webhook, maxPerAccount)
    },
    async listWebhooks(accountId) {
      return listWebhooks(db, accountId)
    },
    async deleteWebhook(accountId, id) {
      return deleteWebhook(db, accountId, id)
    },
    async listDeliveries(accountId, webhookId, page) {
      return listDeliveries(db, accountId, webhookId, page)
    },
    async claimDeliveries(owner, limit, nowMs, leaseUntilMs) {
      return claimDeliveries(db, { owner, limit, nowMs, leaseUntilMs })
    },
    async finishDelivery(by, delivery, result) {
      return finishDelivery(db, by, delivery, result)
    },
    async enableWebhook(accountId, id) {
      return enableWebhook(db, accountId, id)
    },
    async releaseDeliveries(owner, nowMs) {
      return releaseDeliveries(db, owner, nowMs)
    },
  }
}

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
     FROM webhooks w WHERE w.account_id = ? AND w.disabled_at IS NULL AND EXISTS (SELECT 1 FROM json_each(w.events) WHERE value = ?)`,
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
  { owner, limit, nowMs, leaseUntilMs }: DeliveryClaim,
) {
  // The deliverer asks every poll interval; most of the time nothing is due, or only deliveries
  // of webhooks at their cap or disabled. A plain read (no lock) answers that, so the poll only
  // takes the write lock (BEGIN IMMEDIATE, which waits on the dispatcher's outcome writes and
  // stalls the event loop) when there is something it may claim.
  if (
    !q(
      db,
      `SELECT 1 FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
       WHERE d.status = 'pending' AND d.next_attempt_at <= ?1 AND w.disabled_at IS NULL
         AND (SELECT count(*) FROM webhook_deliveries b WHERE b.webhook_id = d.webhook_id
           AND b.status = 'pending' AND b.lease_owner IS NOT NULL AND b.next_attempt_at > ?1) < ?2
       LIMIT 1`,
    ).get(nowMs, MAX_IN_FLIGHT_PER_WEBHOOK)
  ) {
    return []
  }
  return db
    .transaction(() => {
      // The webhooks with something due, claimed longest ago first (never claimed: first of all).
      const hooks = q(
        db,
        `SELECT w.id FROM webhooks w
         WHERE w.disabled_at IS NULL AND w.id IN (SELECT webhook_id FROM webhook_deliveries
           WHERE status = 'pending' AND next_attempt_at <= ?)
         ORDER BY w.last_claimed_at IS NOT NULL, w.last_claimed_at, w.id`,
      ).all(nowMs)
      const busy = q(
        db,
        `SELECT count(*) AS n FROM webhook_deliveries WHERE webhook_id = ? AND status = 'pending'
           AND lease_owner IS NOT NULL AND next_attempt_at > ?`,
      )
      const earliest = q(
        db,
        `SELECT webhook_id, event_id FROM webhook_deliveries
         WHERE webhook_id = ? AND status = 'pending' AND next_attempt_at <= ?
         ORDER BY next_attempt_at, event_id LIMIT ?`,
      )
      const due: Row[][] = []
      for (const hook of hooks) {
        const room = MAX_IN_FLIGHT_PER_WEBHOOK - busy.get(hook.id, nowMs)!.n
        if (room > 0) due.push(earliest.all(hook.id, nowMs, room))
      }
      const claim = q(
        db,
        `UPDATE webhook_deliveries SET lease_owner = ?, next_attempt_at = ?,
           attempts = attempts + 1, last_attempt_at = ?
         WHERE webhook_id = ? AND event_id = ?`,
      )
      const touch = q(db, 'UPDATE webhooks SET last_claimed_at = ? WHERE id = ?')
      const read = q(
        db,
        `SELECT d.*, w.url, w.secret, w.failing_since
         FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
         WHERE d.webhook_id = ? AND d.event_id = ?`,
      )
      return roundRobin(due, limit).map((row) => {
        claim.run(owner, leaseUntilMs, Math.floor(nowMs / 1000), row.webhook_id, row.event_id)
        touch.run(nowMs, row.webhook_id)
        return rowToClaimed(read.get(row.webhook_id, row.event_id)!)
      })
    })
    .immediate()
}

export function finishDelivery(
  db: Database,
  { owner, nowMs, disableAfterMs = DISABLE_AFTER_MS }: DeliveryFinish,
  delivery: { webhookId: string; eventId: string },
  result: DeliveryResult,
) {
  const { status, nextAttemptAtMs, error, deliveredAt } = deliveryResultColumns(result, nowMs)
  return db
    .transaction(() => {
      const recorded =
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
      if (!recorded) return false
      if (result.kind === 'delivered') {
        q(db, 'UPDATE webhooks SET failing_since = NULL WHERE id = ?').run(delivery.webhookId)
      } else {
        // Failing since its first failure after the last delivery; that long ago or more: off.
        q(
          db,
          `UPDATE webhooks SET failing_since = coalesce(failing_since, ?1),
             disabled_at = CASE WHEN disabled_at IS NULL AND coalesce(failing_since, ?1) <= ?2
               THEN ?3 ELSE disabled_at END
           WHERE id = ?4`,
        ).run(nowMs, nowMs - disableAfterMs, Math.floor(nowMs / 1000), delivery.webhookId)
      }
      return true
    })
    .immediate()
}

export function enableWebhook(db: Database, accountId: string, id: string) {
  const row = q(
    db,
    `UPDATE webhooks SET disabled_at = NULL, failing_since = NULL
     WHERE id = ? AND account_id = ? RETURNING *`,
  ).get(id, accountId)
  return row ? rowToWebhook(row) : null
}

export function releaseDeliveries(db: Database, owner: string, nowMs: number) {
  return q(
    db,
    `UPDATE webhook_deliveries SET lease_owner = NULL, next_attempt_at = ?,
       attempts = max(0, attempts - 1)
     WHERE lease_owner = ? AND status = 'pending'`,
  ).run(nowMs, owner).changes
}
