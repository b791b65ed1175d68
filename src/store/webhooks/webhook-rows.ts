/** Row → record mapping of webhooks and their deliveries, shared by both stores. */
import type { WebhookEventType } from '../../domain.ts'
import type {
  ClaimedDelivery,
  DeliveryRecord,
  DeliveryResult,
  WebhookRecord,
} from './webhook-store.ts'
import { num } from '../connection.ts'

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
    disabledAt: num(row.disabled_at),
  }
}

/** Live leases per webhook at most (docs/webhooks-and-streams.md): one stalled receiver holds two attempts, not all. */
export const MAX_IN_FLIGHT_PER_WEBHOOK = 2

/** A webhook failing this long, every attempt, is disabled (docs/webhooks-and-streams.md: 24 h). */
export const DISABLE_AFTER_MS = 24 * 3600 * 1000

/**
 * Round-robin (docs/webhooks-and-streams.md): each webhook's first due delivery before any webhook's second, the
 * webhooks in the order given (claimed longest ago first), at most `limit` in all. `due` holds,
 * per webhook, the deliveries it may still take (its two earliest due less its live leases).
 */
export function roundRobin<T>(due: T[][], limit: number): T[] {
  const picked: T[] = []
  for (let rank = 0; picked.length < limit; rank++) {
    let any = false
    for (const list of due) {
      if (rank >= list.length) continue
      any = true
      picked.push(list[rank]!)
      if (picked.length === limit) break
    }
    if (!any) break
  }
  return picked
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
  return {
    ...rowToDelivery(row),
    url: row.url as string,
    secret: row.secret as string,
    failingSinceMs: num(row.failing_since),
  }
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
