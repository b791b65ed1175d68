/**
 * The batches role: admission (idempotency, the open-batch and daily limits, the credit hold or
 * the wait for credit, the lines), reading batches and their lines, cancelling, deleting an
 * ended batch, a facade batch refused at validation, the waits for credit and for a start in
 * time. One implementation a dialect (sqlite-batches.ts, postgres-batches.ts), one contract
 * (test/store/batches.test.ts); rows in batch-rows.ts. A batch is read with the progress shards
 * the dispatcher writes (src/store/dispatch/), and a cancelled batch ends the way the dispatcher
 * ends every batch, so this role sits above the dispatch role.
 */
import type { DailyLimitRefusal } from '../credit/credit-store.ts'
import type {
  BatchEndpoint,
  BatchRecord,
  LineRecord,
  LineStatus,
  ProviderShare,
} from '../../domain.ts'

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
  /**
   * The batch lane this line goes to while it is open (docs/batch-lanes.md, laneMark): its model
   * and the lane's provider (laneKey), for a line whose own planner order puts a batch lane
   * first. The lane engine claims such lines wherever they stand in the batch; the live lanes
   * leave them to it while the lane is open.
   */
  readonly batchLane?: string
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
  /** What the request said, hashed (BatchRecord.requestHash); absent or null with no key. */
  requestHash?: string | null
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
  /** Their lines, all failed (for /metrics). */
  failedLines: number
}

/** Batches failed before any line ran, and their lines, all failed. */
export interface UnstartedFailed {
  failed: string[]
  lines: number
}

export type CancelResult =
  /** `linesCancelled`: the pending lines this cancel ended (none when it was cancelling already). */
  | { kind: 'cancelled'; batch: BatchRecord; linesCancelled: number }
  | { kind: 'not_found' }
  | { kind: 'conflict'; batch: BatchRecord }

export interface BatchStore {
  /**
   * In one transaction: idempotency check, open-batch limit, daily spend limit, credit hold (or
   * the wait for credit), the batch and all its lines. Either everything is stored or nothing is.
   */
  admitBatch(batch: NewBatch): Promise<AdmitResult>
  /**
   * Batches waiting for credit, each account's earliest first: each whose hold the credit left
   * covers starts (held, `in_progress`), also past an earlier one it does not cover
   * (planCreditWaits); those whose wait is over fail.
   * Also refreshes the deposit each still waiting one needs. Safe on every instance at once: a
   * batch is started or failed once.
   */
  admitWaitingBatches(nowMs: number): Promise<WaitingPass>
  /**
   * Starting in time (docs/open-models.md): fails the in-progress batches none of whose lines has started
   * by their start-by time (start-in-time.ts) with capacity_unavailable, holds released,
   * nothing charged; returns their ids and how many lines failed with them. Safe on every
   * instance at once.
   */
  failUnstartedBatches(nowMs: number): Promise<UnstartedFailed>
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
  deleteEndedBatch(accountId: string, id: string, nowMs?: number): Promise<boolean>
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

/** A batch refused at validation on the OpenAI surface: stored as `failed`, with its errors. */
export type RejectedBatch = Pick<
  NewBatch,
  | 'id'
  | 'accountId'
  | 'name'
  | 'endpoint'
  | 'completionWindowHours'
  | 'createdAt'
  | 'metadata'
  | 'idempotencyKey'
  | 'requestHash'
> & { source: 'openai'; inputFileId: string; errors: BatchErrorEntry[] }

export interface BatchErrorEntry {
  code: string
  message: string
  param: string | null
  line: number | null
}
