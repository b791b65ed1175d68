/**
 * Terminology
 *
 * - account: who pays. Has a balance (settled money it owns), holds (money reserved by open
 *   batches), an open-batch limit and a default per-key rate limit.
 * - key: a bearer secret of one account, stored as a SHA-256 hash, with scopes.
 * - batch: one submitted JSONL file. Its lines are rows; it owns a hold of `cost_ceiling_usd`.
 * - line: one request of a batch, numbered from 1 as in the file (blank lines count).
 * - lease: a claim on a running line by one dispatcher instance, valid until `lease_until`.
 *   Only the lease holder may record the line's result, so a result is recorded once.
 * - ceiling: the pessimistic price of a line (docs/money-and-limits.md); settlement bills real usage instead.
 * - webhook: an account's HTTPS endpoint, told of its batches' terminal statuses (docs/events-and-webhooks.md).
 * - delivery: one event for one webhook, kept in the store (the outbox) until a 2xx answers it or
 *   24 hours of retries pass. An instance claims it with a lease, as it claims lines.
 */
import { randomBytes } from 'node:crypto'
import type { Endpoint } from '../providers/types.ts'

export const BATCH_STATUSES = [
  'validating',
  'in_progress',
  'finalizing',
  'completed',
  'failed',
  'cancelling',
  'cancelled',
  'expired',
] as const
export type BatchStatus = (typeof BATCH_STATUSES)[number]

/** Statuses that still hold credit and count against the open-batch limit. */
export const OPEN_BATCH_STATUSES: readonly BatchStatus[] = [
  'validating',
  'in_progress',
  'finalizing',
  'cancelling',
]
export const isOpenBatch = (status: BatchStatus) => OPEN_BATCH_STATUSES.includes(status)

/**
 * The code of the entry that ends a failed facade batch's `errors` when its file had more
 * problems than are listed: its message says how many (docs/openai-facade.md).
 */
export const MORE_ERRORS = 'more_errors'
/** Statuses a batch never leaves: every other one. */
export const ENDED_BATCH_STATUSES: readonly BatchStatus[] = BATCH_STATUSES.filter(
  (status) => !isOpenBatch(status),
)

export const LINE_STATUSES = [
  'pending',
  'running',
  'succeeded',
  'failed',
  'cancelled',
  'expired',
] as const
export type LineStatus = (typeof LINE_STATUSES)[number]

export type LineErrorCode =
  | 'invalid_request'
  | 'context_length_exceeded'
  | 'upstream_error'
  | 'batch_cancelled'
  | 'batch_expired'
  | 'structured_output_invalid'
  /** docs/structured-outputs.md: checking the answer against its schema passed the time budget; billed. */
  | 'structured_output_unchecked'
  | 'max_cost_reached'
  /** A batch waiting for credit (docs/open-models.md) that was still short after half its window. */
  | 'insufficient_quota'
  /** A fault of the gateway itself while running the line (logged as dispatch.line_crashed); never billed. */
  | 'internal_error'

export interface LineError {
  code: LineErrorCode
  message: string
  /** The upstream's error body for upstream 4xx answers. */
  upstream?: unknown
}

/** The gateway's URL of each endpoint: what a batch line names and where the live calls go. */
export const ENDPOINT_URLS = {
  chat: '/v1/chat/completions',
  embeddings: '/v1/embeddings',
} as const satisfies Record<Endpoint, string>
/** Batch lines may also be Responses API requests, run as the chat calls they translate to (docs/clients/responses.md). */
export const RESPONSES_URL = '/v1/responses'
/**
 * A Message Batches create's lines are Messages API requests (docs/clients/anthropic-sdk.md): passed
 * through to Anthropic offerings, translated for the others. Only such a batch (and its retry) names it.
 */
export const MESSAGES_URL = '/v1/messages'
type PublicBatchUrl = (typeof ENDPOINT_URLS)[Endpoint] | typeof RESPONSES_URL
export type BatchEndpoint = PublicBatchUrl | typeof MESSAGES_URL
/** The URLs a batch file or a facade create may name, as a list, for `z.enum`. */
export const BATCH_URLS: [PublicBatchUrl, ...PublicBatchUrl[]] = [
  ENDPOINT_URLS.chat,
  ENDPOINT_URLS.embeddings,
  RESPONSES_URL,
]
/** Every endpoint a stored batch can have, for `z.enum` in the objects that show it. */
export const BATCH_ENDPOINTS: [BatchEndpoint, ...BatchEndpoint[]] = [...BATCH_URLS, MESSAGES_URL]
const BATCH_URL_SET: ReadonlySet<unknown> = new Set(BATCH_URLS)
/** Whether a line may name `url`; `messages`: the file is a Message Batches create's. */
export const isBatchUrl = (url: unknown, messages = false): url is BatchEndpoint =>
  BATCH_URL_SET.has(url) || (messages && url === MESSAGES_URL)
export type Scope = 'batches' | 'inference' | 'read'
export const ALL_SCOPES: readonly Scope[] = ['batches', 'inference', 'read']

export interface RequestCounts {
  total: number
  pending: number
  running: number
  succeeded: number
  failed: number
  cancelled: number
  expired: number
}

/**
 * Why a batch is not moving (docs/routing.md): null while its lines progress. `until` (Unix seconds) is
 * when the wait is known to end, where it is known.
 */
export const WAITING_CODES = [
  'provider_rate_limited',
  'provider_unavailable',
  'capacity_busy',
  'max_cost_reached',
  'insufficient_credit',
] as const
export type WaitingCode = (typeof WAITING_CODES)[number]
export interface BatchWaiting {
  code: WaitingCode
  message: string
  until?: number
}

/**
 * `waiting` as of `now` (Unix seconds): a wait with a time it ends (a 429 pause, a batch lane's
 * refusal until its lines are sent again) is over once that time has passed, whichever instance
 * saw it (the one that did clears it when the batch moves again; another instance's lines may have
 * moved it first). A new 429 or refusal sets a new one.
 */
export function currentWaiting(waiting: BatchWaiting | null, now: number): BatchWaiting | null {
  const timed =
    waiting?.code === 'provider_rate_limited' || waiting?.code === 'provider_unavailable'
  if (timed && waiting!.until !== undefined)
    return now > waiting!.until + PAUSE_GRACE_SECONDS ? null : waiting
  return waiting
}
/** Lines resume a moment after a pause ends: its wait is shown until then. */
const PAUSE_GRACE_SECONDS = 2

/**
 * A batch's tokens by class, summed over its succeeded lines (docs/pricing.md): input counts every
 * prompt token, the cached and written ones are parts of it.
 */
export interface BatchUsage {
  inputTokens: number
  cachedInputTokens: number
  cacheWriteTokens: number
  outputTokens: number
  /** What they would have cost with every prompt token uncached: caching saved the difference. */
  uncachedCostUsd: string
}

/** A batch as stored; the HTTP layers render it for their surface. */
export interface BatchRecord {
  id: string
  accountId: string
  name: string | null
  endpoint: BatchEndpoint
  status: BatchStatus
  completionWindowHours: number
  createdAt: number
  deadlineAt: number
  startedAt: number | null
  finalizingAt: number | null
  finishedAt: number | null
  cancelRequestedAt: number | null
  counts: RequestCounts
  /** Decimal strings. */
  costCeilingUsd: string
  costUsd: string
  /** What is still held for this batch (ceiling minus what was billed; 0 once finished). */
  heldUsd: string
  /** Which surface made it: the native API, the OpenAI facade or the Anthropic API (docs/clients/anthropic-sdk.md). */
  source: 'native' | 'openai' | 'anthropic'
  metadata: Record<string, string> | null
  inputFileId: string | null
  idempotencyKey: string | null
  /**
   * The hash of the request that made it under an idempotency key (src/admission/request-hash.ts):
   * the same key with another request is refused. Null without a key, or stored before the hash was.
   */
  requestHash: string | null
  /** When retention deleted its lines; null while its results are kept. */
  purgedAt: number | null
  /** The planner's projected finish (docs/routing.md routing.eta), Unix seconds; null before it can tell. */
  eta: number | null
  /** Tokens of its succeeded lines by class (docs/pricing.md). */
  usage: BatchUsage
  /** Validation errors of a batch refused on the OpenAI surface. */
  errors: { code: string; message: string; param: string | null; line: number | null }[] | null
  /** The batch this one retries the unsuccessful lines of (docs/events-and-webhooks.md); null otherwise. */
  parentBatchId: string | null
  /** The batches made by retrying this one, oldest first. */
  retriedBy: string[]
  /**
   * One more on every change of its counts, cost, status or waiting, whoever makes it: the
   * progress stream's event id (a resumed stream sends only states past the one the client saw).
   */
  version: number
  /** The batch's spend cap (docs/money-and-limits.md), a decimal string; null for none. */
  maxCostUsd: string | null
  /** Why the batch is not moving (docs/routing.md); null while its lines progress. */
  waiting: BatchWaiting | null
}

/** Where a batch's lines went, per provider (docs/routing.md `routing.providers`). */
export interface ProviderShare {
  succeeded: number
  failed: number
  /** Calls to this provider in flight now; for a batch lane, the lines inside its provider batches. */
  running: number
  costUsd: string
  /** A batch lane only (docs/batch-lanes.md): the provider batches its lines wait in now. */
  providerBatches?: { count: number; fallbackAt: number }
}

export interface AccountRecord {
  id: string
  name: string
  balanceUsd: string
  heldUsd: string
  maxOpenBatches: number
  rateLimitPerMinute: number
  createdAt: number
}

export interface KeyRecord {
  id: string
  accountId: string
  name: string | null
  scopes: Scope[]
  rateLimitPerMinute: number | null
  createdAt: number
  revokedAt: number | null
  /** First characters of the key, safe to show ("mg_ab12…"). */
  prefix: string
}

/** One line as stored, for results and dispatch. */
export interface LineRecord {
  lineNo: number
  customId: string
  status: LineStatus
  /** The original input line, without BOM and CR. */
  input: string
  /** Response body JSON text when succeeded. */
  response: string | null
  responseStatus: number | null
  error: LineError | null
  costUsd: string | null
  provider: string | null
  attempts: number
  latencyMs: number | null
  /** The line's own ceiling, stored for a batch with a spend cap only (NewLine.ceilingUsd). */
  ceilingUsd?: string
}

export const nowSeconds = () => Math.floor(Date.now() / 1000)

/**
 * Time-ordered ids: 12 hex digits of milliseconds, then 16 random hex digits. Within a process
 * the time part never repeats or goes back, so ids made one after another sort in that order.
 */
let lastMs = 0
export function newId(prefix: string): string {
  lastMs = Math.max(Date.now(), lastMs + 1)
  return `${prefix}${lastMs.toString(16).padStart(12, '0')}${randomBytes(8).toString('hex')}`
}

/** The events a webhook may ask for (docs/events-and-webhooks.md): one per terminal batch status, OpenAI's names. */
export const WEBHOOK_EVENT_TYPES = [
  'batch.completed',
  'batch.failed',
  'batch.cancelled',
  'batch.expired',
] as const
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number]

/** The event a batch's terminal status sends. */
export const webhookEventOf = (
  status: 'completed' | 'failed' | 'cancelled' | 'expired',
): WebhookEventType => `batch.${status}`
