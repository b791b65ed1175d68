/**
 * The store: every piece of state that matters lives here, so several gateway instances can share
 * one PostgreSQL. Each consumer sees only the narrow part it needs: HTTP ingest admits batches,
 * the read side lists and streams them, the dispatcher leases and settles lines.
 *
 * The store is split by role: accounts, credit, files, fine-tunes, webhooks, retention and usage each
 * have a folder (src/store/<role>/) with their interface, both dialects, their rows and their own
 * contract suite (test/store/<role>.test.ts), given only a connection (connection.ts). The
 * batch and dispatch calls, still in this file and the store classes, run the batch contract
 * (test/store/contract.ts). Two dialects: bun:sqlite (the embedded default) and PostgreSQL.
 * Money crosses this boundary as decimal strings.
 * Times: `*At` fields are Unix seconds; lease and retry times are Unix milliseconds.
 */
import type { ChunkStore } from './batch-chunks/chunk-store.ts'
import type { AccountStore, SessionStore } from './accounts/account-store.ts'
import type { DailyLimitRefusal, DailySpendStore, LiveCreditStore } from './credit/credit-store.ts'
import type { FileStore, UploadStore } from './files/file-store.ts'
import type { FineTuneStore } from './fine-tunes/fine-tune-store.ts'
import type { PurgeStore, RetentionStore } from './retention/retention-store.ts'
import type { UsageStore } from './usage/usage-store.ts'
import type { WebhookStore } from './webhooks/webhook-store.ts'
import type {
  BatchEndpoint,
  BatchRecord,
  BatchStatus,
  BatchWaiting,
  LineError,
  LineRecord,
  LineStatus,
  ProviderShare,
  WaitingCode,
  WebhookEventType,
} from '../domain.ts'

// The roles that have a folder of their own (src/store/<role>/): interface, both dialects, rows.
export type {
  AccountStore,
  AccountView,
  NewAccount,
  NewKey,
  NewSession,
  SessionStore,
} from './accounts/account-store.ts'
export type {
  DailyLimitRefusal,
  DailySpend,
  DailySpendStore,
  LiveCreditStore,
} from './credit/credit-store.ts'
export type {
  FileLimits,
  FileQuotaDefaults,
  FileQuotaView,
  FileRecord,
  FileStore,
  FileView,
  NewUpload,
  ReserveResult,
  UploadStore,
} from './files/file-store.ts'
export type {
  FineTuneStore,
  CreateFineTuneResult,
  NewFineTune,
} from './fine-tunes/fine-tune-store.ts'
export type { PurgeStore, RetentionStore } from './retention/retention-store.ts'
export type { UsageAddition, UsageRow, UsageStore } from './usage/usage-store.ts'
export type {
  ClaimedDelivery,
  DeliveryRecord,
  DeliveryResult,
  DeliveryStatus,
  WebhookRecord,
  WebhookStore,
} from './webhooks/webhook-store.ts'

/**
 * Every role with a folder of its own, as one type: each store class sets them on itself from the
 * roles' factories (the connection is all a role is given), beside its batch calls.
 */
export type RoleStores = AccountStore &
  SessionStore &
  DailySpendStore &
  LiveCreditStore &
  FileStore &
  UploadStore &
  FineTuneStore &
  WebhookStore &
  PurgeStore &
  UsageStore

export interface NewLine {
  lineNo: number
  customId: string
  /** The line's JSON text. */
  readonly input: string
  /**
   * The same text as UTF-8, when the line is still in the submitted body's buffer: a store that
   * can write bytes takes these and never needs the decoded string.
   */
  readonly inputBytes?: Uint8Array
  /** The line's own ceiling, exact: stored for a batch with a spend cap (NewBatch.maxCostUsd). */
  readonly ceilingUsd?: string
}

export interface NewBatch {
  id: string
  accountId: string
  name: string | null
  endpoint: BatchEndpoint
  completionWindowHours: number
  createdAt: number
  deadlineAt: number
  costCeilingUsd: string
  /**
   * The batch's spend cap, or null. With one, admission holds min(ceiling, cap) and every line
   * carries its own ceiling (NewLine.ceilingUsd), which the claim keeps within the cap.
   */
  maxCostUsd?: string | null
  lineCount: number
  source: BatchRecord['source']
  metadata: Record<string, string> | null
  inputFileId: string | null
  idempotencyKey: string | null
  /**
   * A retry's parent (docs/events-and-webhooks.md): an ended batch of the same account, which lists the new batch in
   * its `retried_by` from the same transaction on.
   */
  parentBatchId?: string | null
  /** Read once, inside the admitting transaction; may be a lazy generator over the file. */
  lines: Iterable<NewLine>
  /**
   * wait_for_credit=true (docs/open-models.md): when the hold does not fit (or the account's earlier
   * waiting batches are still waiting), the batch is stored `validating`, holding nothing, and
   * waits until this time (Unix seconds) for a deposit. Absent or null: a 402 instead.
   */
  creditWaitUntil?: number | null
}

export type AdmitResult =
  | { kind: 'created'; batch: BatchRecord }
  /** The same Idempotency-Key was used before on this account: the batch it made. */
  | { kind: 'duplicate'; batch: BatchRecord }
  | { kind: 'insufficient_quota'; availableUsd: string }
  | { kind: 'limit_exceeded'; limit: number; inUse: number }
  | ({ kind: 'daily_limit_exceeded' } & DailyLimitRefusal)

/** What a pass over the batches waiting for credit did (BatchStore.admitWaitingBatches). */
export interface WaitingPass {
  /** Now holding their ceiling, `in_progress`. */
  started: string[]
  /** Still short at the end of their wait: `failed`, every line failed, nothing charged. */
  failed: string[]
}

export type CancelResult =
  | { kind: 'cancelled'; batch: BatchRecord }
  | { kind: 'not_found' }
  | { kind: 'conflict'; batch: BatchRecord }

export interface BatchStore {
  /**
   * In one transaction: idempotency check, open-batch limit, daily spend limit, credit hold (or
   * the wait for credit), the batch and all its lines. Either everything is stored or nothing is.
   */
  admitBatch(batch: NewBatch): Promise<AdmitResult>
  /**
   * Batches waiting for credit, each account's earliest first: those whose hold now fits the
   * available credit start (held, `in_progress`), stopping at the first that does not fit, so a
   * later one never takes the credit an earlier one waits for; those whose wait is over fail.
   * Also refreshes the deposit each still waiting one needs. Safe on every instance at once: a
   * batch is started or failed once.
   */
  admitWaitingBatches(nowMs: number): Promise<WaitingPass>
  /**
   * Starting in time (docs/open-models.md): fails the in-progress batches none of whose lines has started
   * by their start-by time (store/start-in-time.ts) with capacity_unavailable, holds released,
   * nothing charged; returns their ids. Safe on every instance at once.
   */
  failUnstartedBatches(nowMs: number): Promise<string[]>
  findByIdempotencyKey(accountId: string, key: string): Promise<BatchRecord | null>
  /** Stores a batch that failed validation: no lines, no hold, status `failed`. */
  recordRejectedBatch(batch: RejectedBatch): Promise<BatchRecord>
  /** Another account's batch is null, exactly like a missing one. */
  getBatch(accountId: string, id: string): Promise<BatchRecord | null>
  /** Newest first. `after` is the id of the last batch of the previous page. */
  listBatches(
    accountId: string,
    page: { limit: number; after: string | null },
  ): Promise<{ batches: BatchRecord[]; hasMore: boolean }>
  cancelBatch(accountId: string, id: string, now: number): Promise<CancelResult>
  /**
   * Deletes an ended batch of the account with its lines, files, provider shares and delivery
   * log (the Anthropic API's delete, docs/clients/anthropic-sdk.md); false when there is no such ended batch.
   */
  deleteEndedBatch(accountId: string, id: string): Promise<boolean>
  /**
   * Where each batch's lines went (docs/routing.md `routing.providers`): per provider, lines ended there
   * and their cost, and calls in flight to it now. A batch with none yet is left out.
   */
  providerShares(batchIds: readonly string[]): Promise<Map<string, Record<string, ProviderShare>>>
  /** Lines with `lineNo > afterLineNo` in line order, optionally only some statuses. */
  readLines(
    batchId: string,
    query: { afterLineNo: number; limit: number; statuses: readonly LineStatus[] | null },
  ): Promise<LineRecord[]>
}

/** A line leased to one dispatcher instance. */
export interface ClaimedLine {
  batchId: string
  accountId: string
  lineNo: number
  customId: string
  input: string
  /** Attempts including this one. */
  attempts: number
  deadlineAt: number
  /**
   * The line's own ceiling, for a batch with a spend cap: it is never billed more (the claim
   * reserved this much of the cap for it).
   */
  ceilingUsd?: string
}

export interface RunnableBatch {
  id: string
  accountId: string
  /** Unix seconds; with deadlineAt, the window the spill margin is a share of. */
  createdAt: number
  deadlineAt: number
  endpoint: BatchEndpoint
  pending: number
}

/** A line's tokens by class: input counts every prompt token, cached and written are parts of it. */
export interface LineUsage {
  input: number
  cached: number
  written: number
  output: number
  /** What the line would have cost with every prompt token uncached (same offering and tier). */
  uncachedCostUsd: string
}

/** A succeeded line as the usage report counts it: its catalog model and the usage it was billed. */
export interface LineAccounting {
  model: string
  /** Every prompt token; `cachedInputTokens` is the part read from the provider's cache. */
  inputTokens: number
  cachedInputTokens: number
  outputTokens: number
  /** The same usage priced on the model's first listed offering. */
  firstOfferingCostUsd: string
}

export type LineOutcome =
  | {
      batchId: string
      lineNo: number
      kind: 'succeeded'
      responseStatus: number
      /** The response body as JSON text, stored and streamed back verbatim. */
      response: string
      costUsd: string
      provider: string
      latencyMs: number
      /** The tokens it was billed for, by class (docs/pricing.md); added to its batch's usage. */
      usage?: LineUsage
      /**
       * Present only when `costUsd` passed the line's ceiling (the upstream reported more than
       * the ceiling allows): the line is billed its cost, but no more than the ceiling of it comes
       * out of the batch's hold; the excess is the account's free credit's (docs/money-and-limits.md).
       */
      ceilingUsd?: string
      /** What the usage report counts (docs/operations.md); not stored with the line. */
      accounting?: LineAccounting
    }
  | {
      batchId: string
      lineNo: number
      kind: 'failed'
      error: LineError
      responseStatus: number | null
      costUsd: string
      provider: string | null
      latencyMs: number | null
      /** A failure that is billed (structured_output_unchecked): its tokens, as for a success. */
      usage?: LineUsage
      accounting?: LineAccounting
    }
  | {
      batchId: string
      lineNo: number
      kind: 'retry'
      /** Unix ms before which the line is not claimed again. */
      notBefore: number
      /**
       * The line was never served (its provider unavailable, its batch stopped): the attempt its
       * claim counted is given back, so waiting out an outage uses none of a line's attempts.
       */
      unsent?: boolean
    }

/** A change in the calls one instance has in flight to a provider for a batch's lines. */
export interface CallsChange {
  batchId: string
  provider: string
  /** Calls started less calls ended. */
  delta: number
}

export interface DispatchStore {
  /** Batches with lines ready to claim, earliest deadline first. */
  runnableBatches(nowMs: number, limit: number): Promise<RunnableBatch[]>
  /**
   * Leases up to `limit` pending lines of one batch, in line order. For a batch with a spend
   * cap, atomically against every other claim of it: only lines whose ceiling fits in
   * max_cost_usd − cost_usd − the ceilings of its lines in flight, taken in line order among
   * those that fit on their own until the next would not; each claimed ceiling is reserved until
   * its line is recorded or handed back. A capped claim that leaves a due line unable to fit sets
   * the batch waiting `max_cost_reached`, and one that takes lines with room to spare clears it.
   */
  claimLines(
    batchId: string,
    owner: string,
    limit: number,
    nowMs: number,
    leaseUntilMs: number,
  ): Promise<ClaimedLine[]>
  /** The statuses of these batches (missing ids are left out). */
  batchStatuses(ids: readonly string[]): Promise<Record<string, BatchStatus>>
  /** Extends every lease `owner` holds. */
  renewLeases(owner: string, leaseUntilMs: number): Promise<number>
  /**
   * Records outcomes of lines `owner` still leases, billing each in the same transaction, and
   * counts each settled line and its cost for its provider (providerShares). Outcomes for lines
   * whose lease was lost are ignored. `calls`: how the calls `owner` has in flight to each
   * provider changed since its last write. Returns how many outcomes were recorded.
   */
  recordOutcomes(
    owner: string,
    outcomes: readonly LineOutcome[],
    nowMs: number,
    calls?: readonly CallsChange[],
  ): Promise<number>
  /** Graceful shutdown: gives back every line `owner` holds, untouched. */
  releaseLeases(owner: string): Promise<number>
  /** Returns lines whose lease ran out to pending. */
  reapExpiredLeases(nowMs: number): Promise<number>
  /** Expires overdue batches and finalizes finished ones; returns the ids that changed status. */
  advanceBatches(nowSeconds: number): Promise<string[]>
  /**
   * Sets (or with null clears) why an open batch waits, so that every instance serves it. Written
   * only while the batch is open and its current code is none or one of `replaces` (default:
   * any): a part that clears its own code leaves another part's standing. Returns whether it
   * changed anything.
   */
  setWaiting(
    batchId: string,
    waiting: BatchWaiting | null,
    replaces?: readonly WaitingCode[],
  ): Promise<boolean>
  /** The planner's projected finish of open batches (Unix seconds, or null); ended batches are left as they are. */
  recordEtas(etas: readonly { batchId: string; eta: number | null }[]): Promise<void>
}

/** A batch refused at validation on the OpenAI surface: stored as `failed`, with its errors. */
export type RejectedBatch = Pick<
  NewBatch,
  'id' | 'accountId' | 'name' | 'endpoint' | 'completionWindowHours' | 'createdAt' | 'metadata'
> & { source: 'openai'; inputFileId: string; errors: BatchErrorEntry[] }

export interface BatchErrorEntry {
  code: string
  message: string
  param: string | null
  line: number | null
}

/** Everything but the dispatcher's calls, which come apart (OpenedStore). */
export interface Store extends BatchStore, RetentionStore, RoleStores {
  readonly kind: 'sqlite' | 'postgres'
  ping(): Promise<void>
  /** Closes its connections, the dispatch part's (and its thread) included. */
  close(): Promise<void>
}

/**
 * A store as opened: the dispatcher's part apart from the rest. For a SQLite file and for
 * PostgreSQL `dispatch` runs on a thread with a connection of its own (dispatch-thread.ts), so
 * claiming and recording do not hold up the event loop; in memory it shares the connection.
 */
export interface OpenedStore {
  store: Store
  dispatch: DispatchStore
  /** The batch lanes' chunk intents (docs/batch-lanes.md; batch-chunks/chunk-store.ts). */
  chunks: ChunkStore
}
