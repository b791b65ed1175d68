/** Row → record mapping of webhooks and their deliveries, shared by both stores. */
import type { WebhookEventType } from '../domain.ts'
import type { ClaimedDelivery, DeliveryRecord, DeliveryResult, WebhookRecord } from './store.ts'
import { num } from './rows.ts'

type Row = Record<string, unknown>

export function rowToWebhook(row: Row): WebhookRecord {
  const events = typeof row.events === 'string' ? JSON.parse(row.events) : row.events
  return {
    id: row.id as string,
    accountId: row.account_id as string,
    url: row.url as string,
    events: events as WebhookEventType[],
    secret: row.secret as string,
    createdAt: Number(row.created_at),
  }
}

export function rowToDelivery(row: Row): DeliveryRecord {
  return {
    webhookId: row.webhook_id as string,
    eventId: row.event_id as string,
    type: row.event_type as WebhookEventType,
    batchId: row.batch_id as string,
    createdAt: Number(row.created_at),
    status: row.status as DeliveryRecord['status'],
    attempts: Number(row.attempts),
    nextAttemptAtMs: row.status === 'pending' ? num(row.next_attempt_at) : null,
    lastAttemptAt: num(row.last_attempt_at),
    lastStatusCode: num(row.last_status_code),
    lastError: (row.last_error as string | null) ?? null,
    deliveredAt: num(row.delivered_at),
  }
}

export function rowToClaimed(row: Row): ClaimedDelivery {
  return { ...rowToDelivery(row), url: row.url as string, secret: row.secret as string }
}

/**
 * What an attempt's result writes to its delivery (finishDelivery of both stores): delivered
 * now, pending again until the retry's time (in ms, as given), or failed.
 */
export function deliveryResultColumns(result: DeliveryResult, nowMs: number) {
  const at = Math.floor(nowMs / 1000)
  if (result.kind === 'delivered')
    return { status: 'delivered', nextAttemptAtMs: null, error: null, deliveredAt: at }
  if (result.kind === 'retry')
    return {
      status: 'pending',
      nextAttemptAtMs: result.atMs,
      error: result.error,
      deliveredAt: null,
    }
  return { status: 'failed', nextAttemptAtMs: null, error: result.error, deliveredAt: null }
}
