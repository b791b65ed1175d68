/**
 * Webhooks and their outbox (docs/events-and-webhooks.md). Deliveries are enqueued by the store
 * itself, in the transaction that gives a batch its terminal status (every path: finishing,
 * cancelling, expiring, a facade batch refused at validation), for each of the account's webhooks
 * that asks for that event: the batch code calls enqueueWebhookEvents of its dialect's module.
 * One implementation a dialect (sqlite-webhooks.ts, postgres-webhooks.ts), one contract
 * (test/store/webhooks.test.ts); rows in webhook-rows.ts.
 */
import type { WebhookEventType } from '../../domain.ts'

/**
 * An account's webhook endpoint (docs/events-and-webhooks.md). `secret` (whsec_…) signs its deliveries, so it is
 * kept as it is; it leaves the store only to sign and in the answer to the create.
 */
export interface WebhookRecord {
  id: string
  accountId: string
  url: string
  events: WebhookEventType[]
  secret: string
  createdAt: number
  /**
   * When it was disabled (Unix s; docs/structured-outputs.md): every attempt for 24 h failed. Null while enabled;
   * a new webhook is enabled whatever this says.
   */
  disabledAt: number | null
}

export type DeliveryStatus = 'pending' | 'delivered' | 'failed'

/**
 * One event for one webhook: a row of the outbox, written in the transaction that gave its batch
 * a terminal status. `eventId` is the event's id (evt_…) and the `webhook-id` of every attempt.
 * Times are Unix seconds but for `nextAttemptAtMs`.
 */
export interface DeliveryRecord {
  webhookId: string
  eventId: string
  type: WebhookEventType
  batchId: string
  /** When the batch took its terminal status: the event's `created_at`. */
  createdAt: number
  status: DeliveryStatus
  /** Attempts made or under way. */
  attempts: number
  /** When a pending delivery is due (while one is under way: when its lease runs out); else null. */
  nextAttemptAtMs: number | null
  lastAttemptAt: number | null
  lastStatusCode: number | null
  lastError: string | null
  deliveredAt: number | null
}

/** A delivery leased to one instance, with what it needs to send, sign and schedule it. */
export interface ClaimedDelivery extends DeliveryRecord {
  url: string
  secret: string
  /**
   * The webhook's first failed attempt since its last delivered one (Unix ms) when claimed; null
   * while it is not failing. The retry schedule's last attempt is timed from it.
   */
  failingSinceMs: number | null
}

/** How an attempt ended. */
export type DeliveryResult =
  | { kind: 'delivered'; statusCode: number }
  | { kind: 'retry'; atMs: number; statusCode: number | null; error: string }
  /** Given up: the next attempt would fall past the retry window. */
  | { kind: 'failed'; statusCode: number | null; error: string }

/** A claim of due deliveries: up to `limit`, leased to `owner` from `nowMs` until `leaseUntilMs`. */
export interface DeliveryClaim {
  owner: string
  limit: number
  nowMs: number
  leaseUntilMs: number
}

/** Who records an attempt (only the holder of its lease may) and when. */
export interface DeliveryFinish {
  owner: string
  nowMs: number
  /** Failing this long or more disables the webhook; default 24 h (DISABLE_AFTER_MS). */
  disableAfterMs?: number
}

/**
 * Webhooks and their outbox. Deliveries are enqueued by the store itself, in the transaction that
 * gives a batch its terminal status (every path: finishing, cancelling, expiring, a facade batch
 * refused at validation), for each of the account's webhooks that asks for that event.
 */
export interface WebhookStore {
  /** False when the account has `maxPerAccount` webhooks already. */
  createWebhook(webhook: WebhookRecord, maxPerAccount: number): Promise<boolean>
  /** The account's webhooks, newest first. */
  listWebhooks(accountId: string): Promise<WebhookRecord[]>
  /** Deletes the webhook and its deliveries; false when it is not the account's. */
  deleteWebhook(accountId: string, id: string): Promise<boolean>
  /** The webhook's deliveries, newest first; null when the webhook is not the account's. */
  listDeliveries(
    accountId: string,
    webhookId: string,
    page: { limit: number; after: string | null },
  ): Promise<{ deliveries: DeliveryRecord[]; hasMore: boolean } | null>
  /**
   * Leases up to `limit` due deliveries to `owner` until `leaseUntilMs`, counting an attempt for
   * each; another instance's live lease is never taken, an expired one is. Fair (docs/structured-outputs.md): at
   * most `MAX_IN_FLIGHT_PER_WEBHOOK` live leases per webhook across every instance sharing the
   * store, each webhook's first due delivery before any webhook's second, the webhooks claimed
   * longest ago first; a disabled webhook's deliveries are not claimed.
   */
  claimDeliveries(
    owner: string,
    limit: number,
    nowMs: number,
    leaseUntilMs: number,
  ): Promise<ClaimedDelivery[]>
  /**
   * Records an attempt, only while `owner` still holds its lease; false otherwise. A failed one
   * disables its webhook when every attempt since its first failure, `disableAfterMs` or more ago
   * (default 24 h), has failed (docs/webhooks-and-streams.md); a delivered one clears that count.
   */
  finishDelivery(
    by: DeliveryFinish,
    delivery: { webhookId: string; eventId: string },
    result: DeliveryResult,
  ): Promise<boolean>
  /** Enables a disabled webhook again (its failures forgotten); null when not the account's. */
  enableWebhook(accountId: string, id: string): Promise<WebhookRecord | null>
  /** Graceful stop: hands back `owner`'s deliveries, due at once, the attempt not counted. */
  releaseDeliveries(owner: string, nowMs: number): Promise<number>
}
