/**
 * Webhooks and their outbox on PostgreSQL (see sql/0007_webhooks.sql and 0012). A claim locks the
 * webhooks it serves with `FOR UPDATE SKIP LOCKED`: instances claiming at once each get other
 * webhooks' deliveries, one whose lease is live is never taken, and no webhook passes its cap.
 */
import type postgres from 'postgres'
import { newId, webhookEventOf } from '../../domain.ts'
import type { PostgresPool } from '../connection.ts'
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

type Sql = PostgresPool

/** The webhook store on PostgreSQL. */
export function createPostgresWebhookStore(sql: PostgresPool): WebhookStore {
  return {
    createWebhook: (webhook, maxPerAccount) => createWebhook(sql, webhook, maxPerAccount),
    listWebhooks: (accountId) => listWebhooks(sql, accountId),
    deleteWebhook: (accountId, id) => deleteWebhook(sql, accountId, id),
    listDeliveries: (accountId, webhookId, page) => listDeliveries(sql, accountId, webhookId, page),
    claimDeliveries: (owner, limit, nowMs, leaseUntilMs) =>
      claimDeliveries(sql, { owner, limit, nowMs, leaseUntilMs }),
    finishDelivery: (by, delivery, result) => finishDelivery(sql, by, delivery, result),
    enableWebhook: (accountId, id) => enableWebhook(sql, accountId, id),
    releaseDeliveries: (owner, nowMs) => releaseDeliveries(sql, owner, nowMs),
  }
}
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
      AND w.disabled_at IS NULL
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

/**
 * A fair claim (docs/webhooks-and-streams.md) in one transaction. First the webhooks with something due are locked
 * (`FOR UPDATE SKIP LOCKED`: an instance claiming at once takes other webhooks), claimed longest
 * ago first. Then, in a statement that sees every claim committed before those locks were
 * granted, each one's live leases are counted and its earliest due deliveries taken up to
 * MAX_IN_FLIGHT_PER_WEBHOOK, so the cap holds across every instance sharing the database.
 */
export async function claimDeliveries(
  sql: Sql,
  { owner, limit, nowMs, leaseUntilMs }: DeliveryClaim,
) {
  const now = Math.floor(nowMs)
  return sql.begin(async (tx) => {
    // Webhooks at their cap (seen so) are left out here only to keep the locked set small; the
    // count below is what decides.
    const hooks = await tx`
      SELECT w.id FROM webhooks w
      WHERE w.disabled_at IS NULL
        AND w.id IN (SELECT DISTINCT webhook_id FROM webhook_deliveries
          WHERE status = 'pending' AND next_attempt_at <= ${now})
        AND (SELECT count(*) FROM webhook_deliveries b WHERE b.webhook_id = w.id
          AND b.status = 'pending' AND b.lease_owner IS NOT NULL AND b.next_attempt_at > ${now})
          < ${MAX_IN_FLIGHT_PER_WEBHOOK}
      ORDER BY w.last_claimed_at NULLS FIRST, w.id
      LIMIT ${limit}
      FOR UPDATE OF w SKIP LOCKED`
    if (hooks.length === 0) return []
    const ids = hooks.map((hook) => hook.id as string)
    const rows = await tx`
      SELECT h.id AS webhook_id, d.event_id, h.ord
      FROM unnest(${ids}::text[]) WITH ORDINALITY AS h (id, ord)
      CROSS JOIN LATERAL (
        SELECT count(*)::int AS n FROM webhook_deliveries b WHERE b.webhook_id = h.id
          AND b.status = 'pending' AND b.lease_owner IS NOT NULL AND b.next_attempt_at > ${now}
      ) busy
      CROSS JOIN LATERAL (
        SELECT event_id FROM webhook_deliveries d WHERE d.webhook_id = h.id
          AND d.status = 'pending' AND d.next_attempt_at <= ${now}
        ORDER BY d.next_attempt_at, d.event_id
        LIMIT GREATEST(0, ${MAX_IN_FLIGHT_PER_WEBHOOK} - busy.n)
      ) d
      ORDER BY h.ord, d.event_id`
    const due = new Map<string, { webhook_id: string; event_id: string }[]>()
    for (const row of rows) {
      const list = due.get(row.webhook_id) ?? []
      list.push({ webhook_id: row.webhook_id, event_id: row.event_id })
      due.set(row.webhook_id, list)
    }
    const picked = roundRobin([...due.values()], limit)
    if (picked.length === 0) return []
    const claimed = await tx`
      UPDATE webhook_deliveries d SET lease_owner = ${owner},
        next_attempt_at = ${Math.ceil(leaseUntilMs)}, attempts = d.attempts + 1,
        last_attempt_at = ${Math.floor(nowMs / 1000)}
      FROM jsonb_to_recordset(${tx.json(picked)}) AS p (webhook_id text, event_id text),
        webhooks w
      WHERE d.webhook_id = p.webhook_id AND d.event_id = p.event_id AND w.id = p.webhook_id
        AND d.status = 'pending' AND d.next_attempt_at <= ${now}
      RETURNING d.*, w.url, w.secret, w.failing_since`
    await tx`
      UPDATE webhooks SET last_claimed_at = ${now}
      WHERE id IN (SELECT DISTINCT webhook_id FROM jsonb_to_recordset(${tx.json(picked)})
        AS p (webhook_id text, event_id text))`
    // The order of the round, which RETURNING does not keep.
    const order = new Map(picked.map((p, index) => [`${p.webhook_id} ${p.event_id}`, index]))
    return claimed
      .map(rowToClaimed)
      .sort(
        (a, b) =>
          order.get(`${a.webhookId} ${a.eventId}`)! - order.get(`${b.webhookId} ${b.eventId}`)!,
      )
  })
}

export async function finishDelivery(
  sql: Sql,
  { owner, nowMs, disableAfterMs = DISABLE_AFTER_MS }: DeliveryFinish,
  delivery: { webhookId: string; eventId: string },
  result: DeliveryResult,
) {
  const { status, nextAttemptAtMs, error, deliveredAt } = deliveryResultColumns(result, nowMs)
  // A bigint column: a retry is due no sooner than asked.
  const next = nextAttemptAtMs === null ? null : Math.ceil(nextAttemptAtMs)
  const now = Math.floor(nowMs)
  // Delivered: the failures are forgotten. Failed: failing since the first failure after the
  // last delivery, and disabled once that is `disableAfterMs` or more ago (docs/webhooks-and-streams.md).
  const webhook =
    result.kind === 'delivered'
      ? sql`UPDATE webhooks SET failing_since = NULL WHERE id IN (SELECT webhook_id FROM done)`
      : sql`UPDATE webhooks SET failing_since = COALESCE(failing_since, ${now}),
          disabled_at = CASE WHEN disabled_at IS NULL
              AND COALESCE(failing_since, ${now}) <= ${now - disableAfterMs}
            THEN ${Math.floor(nowMs / 1000)} ELSE disabled_at END
          WHERE id IN (SELECT webhook_id FROM done)`
  const [{ n }] = await sql`
    WITH done AS (
      UPDATE webhook_deliveries SET status = ${status}, next_attempt_at = ${next},
        lease_owner = NULL, last_status_code = ${result.statusCode}, last_error = ${error},
        delivered_at = ${deliveredAt}
      WHERE webhook_id = ${delivery.webhookId} AND event_id = ${delivery.eventId}
        AND lease_owner = ${owner} AND status = 'pending'
      RETURNING webhook_id),
    hook AS (${webhook})
    SELECT count(*)::int AS n FROM done`
  return n > 0
}

export async function enableWebhook(sql: Sql, accountId: string, id: string) {
  const [row] = await sql`
    UPDATE webhooks SET disabled_at = NULL, failing_since = NULL
    WHERE id = ${id} AND account_id = ${accountId} RETURNING *`
  return row ? rowToWebhook(row) : null
}

export async function releaseDeliveries(sql: Sql, owner: string, nowMs: number) {
  const released = await sql`
    UPDATE webhook_deliveries SET lease_owner = NULL, next_attempt_at = ${Math.floor(nowMs)},
      attempts = GREATEST(0, attempts - 1)
    WHERE lease_owner = ${owner} AND status = 'pending'`
  return released.count
}
