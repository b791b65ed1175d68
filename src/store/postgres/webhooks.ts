/**
 * Webhooks and their outbox on PostgreSQL (see sql/0007_webhooks.sql). A claim is one UPDATE of
 * the rows a `SELECT … FOR UPDATE SKIP LOCKED` picked, as for lines: instances claiming at once
 * each get other deliveries, and one whose lease is live is never taken.
 */
import type postgres from 'postgres'
import { newId, webhookEventOf } from '../../domain.ts'
import type { DeliveryResult, WebhookRecord } from '../store.ts'
import {
  deliveryResultColumns,
  rowToClaimed,
  rowToDelivery,
  rowToWebhook,
} from '../webhook-rows.ts'

type Sql = postgres.Sql
type Status = Parameters<typeof webhookEventOf>[0]

/**
 * Called in the transaction that gives batches their terminal status: one delivery per webhook of
 * each batch's account that asks for its event, the same event id for all of a batch's.
 */
export async function enqueueWebhookEvents(
  tx: postgres.TransactionSql,
  batches: readonly { id: string; accountId: string; status: Status }[],
  at: number,
) {
  if (batches.length === 0) return
  const events = batches.map((batch) => ({
    event_id: newId('evt_'),
    event_type: webhookEventOf(batch.status),
    batch_id: batch.id,
    account_id: batch.accountId,
  }))
  await tx`
    INSERT INTO webhook_deliveries
      (webhook_id, event_id, event_type, batch_id, created_at, status, attempts, next_attempt_at)
    SELECT w.id, e.event_id, e.event_type, e.batch_id, ${at}, 'pending', 0, ${at * 1000}
    FROM jsonb_to_recordset(${tx.json(events)})
      AS e (event_id text, event_type text, batch_id text, account_id text)
    JOIN webhooks w ON w.account_id = e.account_id AND w.events @> jsonb_build_array(e.event_type)
    ON CONFLICT DO NOTHING`
}

export async function createWebhook(sql: Sql, webhook: WebhookRecord, maxPerAccount: number) {
  return sql.begin(async (tx) => {
    // The account row is the lock that keeps racing creates within the limit.
    await tx`SELECT id FROM accounts WHERE id = ${webhook.accountId} FOR UPDATE`
    const [{ n }] = await tx`
      SELECT count(*)::int AS n FROM webhooks WHERE account_id = ${webhook.accountId}`
    if (n >= maxPerAccount) return false
    await tx`
      INSERT INTO webhooks (id, account_id, url, events, secret, created_at)
      VALUES (${webhook.id}, ${webhook.accountId}, ${webhook.url}, ${tx.json(webhook.events)},
        ${webhook.secret}, ${webhook.createdAt})`
    return true
  })
}

export async function listWebhooks(sql: Sql, accountId: string) {
  const rows = await sql`SELECT * FROM webhooks WHERE account_id = ${accountId} ORDER BY id DESC`
  return rows.map(rowToWebhook)
}

export async function deleteWebhook(sql: Sql, accountId: string, id: string) {
  return sql.begin(async (tx) => {
    const gone = await tx`DELETE FROM webhooks WHERE id = ${id} AND account_id = ${accountId}`
    if (gone.count === 0) return false
    await tx`DELETE FROM webhook_deliveries WHERE webhook_id = ${id}`
    return true
  })
}

export async function listDeliveries(
  sql: Sql,
  accountId: string,
  webhookId: string,
  page: { limit: number; after: string | null },
) {
  const [own] = await sql`
    SELECT 1 FROM webhooks WHERE id = ${webhookId} AND account_id = ${accountId}`
  if (!own) return null
  const after = page.after ? sql`AND event_id < ${page.after}` : sql``
  const rows = await sql`
    SELECT * FROM webhook_deliveries WHERE webhook_id = ${webhookId} ${after}
    ORDER BY event_id DESC LIMIT ${page.limit + 1}`
  return {
    deliveries: rows.slice(0, page.limit).map(rowToDelivery),
    hasMore: rows.length > page.limit,
  }
}

export async function claimDeliveries(
  sql: Sql,
  owner: string,
  limit: number,
  nowMs: number,
  leaseUntilMs: number,
) {
  const rows = await sql`
    WITH picked AS (
      SELECT d.webhook_id, d.event_id FROM webhook_deliveries d
      WHERE d.status = 'pending' AND d.next_attempt_at <= ${Math.floor(nowMs)}
        AND EXISTS (SELECT 1 FROM webhooks w WHERE w.id = d.webhook_id)
      ORDER BY d.next_attempt_at LIMIT ${limit}
      FOR UPDATE SKIP LOCKED)
    UPDATE webhook_deliveries d SET lease_owner = ${owner},
      next_attempt_at = ${Math.ceil(leaseUntilMs)}, attempts = d.attempts + 1,
      last_attempt_at = ${Math.floor(nowMs / 1000)}
    FROM picked JOIN webhooks w ON w.id = picked.webhook_id
    WHERE d.webhook_id = picked.webhook_id AND d.event_id = picked.event_id
    RETURNING d.*, w.url, w.secret`
  return rows.map(rowToClaimed)
}

export async function finishDelivery(
  sql: Sql,
  owner: string,
  delivery: { webhookId: string; eventId: string },
  result: DeliveryResult,
  nowMs: number,
) {
  const { status, nextAttemptAtMs, error, deliveredAt } = deliveryResultColumns(result, nowMs)
  // A bigint column: a retry is due no sooner than asked.
  const next = nextAttemptAtMs === null ? null : Math.ceil(nextAttemptAtMs)
  const updated = await sql`
    UPDATE webhook_deliveries SET status = ${status}, next_attempt_at = ${next},
      lease_owner = NULL, last_status_code = ${result.statusCode}, last_error = ${error},
      delivered_at = ${deliveredAt}
    WHERE webhook_id = ${delivery.webhookId} AND event_id = ${delivery.eventId}
      AND lease_owner = ${owner} AND status = 'pending'`
  return updated.count > 0
}

export async function releaseDeliveries(sql: Sql, owner: string, nowMs: number) {
  const released = await sql`
    UPDATE webhook_deliveries SET lease_owner = NULL, next_attempt_at = ${Math.floor(nowMs)},
      attempts = GREATEST(0, attempts - 1)
    WHERE lease_owner = ${owner} AND status = 'pending'`
  return released.count
}
