/**
 * The dispatch role: which batches have lines to run, claiming lines under leases, recording
 * their outcomes with their charges, renewing, releasing and reaping leases, moving batches on
 * to their terminal status, and what a batch waits for and when it should end (ETAs). One
 * query family per file, both dialects (sqlite-*.ts, postgres-*.ts), composed by
 * sqlite-dispatch.ts and postgres-dispatch.ts; one contract (test/store/dispatch.test.ts); rows
 * in dispatch-rows.ts. For a SQLite file and for PostgreSQL it runs on a thread of its own
 * (dispatch-thread.ts).
 */
import type {
  BatchEndpoint,
  BatchStatus,
  BatchWaiting,
  LineError,
  WaitingCode,
} from '../../domain.ts'

/** Lines ended without running (a deadline, a cancel, a spend cap), by status: for /metrics. */
export interface LinesEnded {
  cancelled: number
  expired: number
}

/** What a pass of advanceBatches did. */
export interface AdvancedBatches {
  /** The batches whose status changed. */
  changed: string[]
  ended: LinesEnded
  /**
   * The batches whose `waiting` the pass set or cleared (insufficient_credit while their account's
   * balance is below its holds, docs/money-and-limits.md); absent when none.
   */
  waited?: string[]
}

/** One line of one batch. */
export interface LineKey {
  batchId: string
  lineNo: number
}

/**
 * How the lease owner of a line in a batch lane's chunk begins (`chunk:<id>`, docs/batch-lanes.md):
 * such a line is in a provider batch, and only the chunk's holder records it. Every other owner is
 * a gateway instance's id.
 */
export const CHUNK_LINE_OWNER_PREFIX = 'chunk:'

/** What a claim asks for: up to `limit` lines of one batch, leased to `owner` until `leaseUntilMs`. */
export interface LineClaim {
  batchId: string
  owner: string
  limit: number
  nowMs: number
  leaseUntilMs: number
  /** Only some of the batch's lines, by the batch lane they are marked for (NewLine.batchLane). */
  lanes?: LaneFilter
}

/**
 * The lines of a batch a claim takes by the batch lane they are marked for: those of one lane (the
 * lane engine's), or all but those of these lanes (the live lanes', leaving them to the engine).
 */
export type LaneFilter = { only: string } | { except: readonly string[] }

/** A batch's first due line as nextLine reads it. */
export interface NextLine {
  lineNo: number
  input: string
  /** The batch lane it is marked for (NewLine.batchLane), null for none. */
  batchLane: string | null
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
  /** The batch lane it is marked for (NewLine.batchLane), if any. */
  batchLane?: string
}

export interface RunnableBatch {
  id: string
  accountId: string
  /** Unix seconds; with deadlineAt, the window the spill margin is a share of. */
  createdAt: number
  deadlineAt: number
  endpoint: BatchEndpoint
  pending: number
  /** Lines claimed and not yet recorded, on every instance. */
  running: number
  /** Whether admission marked any of its lines for a batch lane (NewLine.batchLane). */
  laneLines: boolean
  /**
   * Set by the batch lanes for the live dispatcher (lane-batches.ts): the batch lanes whose
   * lines it leaves to the lane engine, claiming the others.
   */
  leaveToLanes?: readonly string[]
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

/** What one recordOutcomes call is given, as one value (DispatchStore.recordOutcomes). */
export interface OutcomesRecord {
  owner: string
  outcomes: readonly LineOutcome[]
  nowMs: number
  calls?: readonly CallsChange[]
}

/** What one recordOutcomes call stored (DispatchStore.recordOutcomes). */
export interface RecordedOutcomes {
  /** How many of the outcomes were recorded. */
  recorded: number
  /**
   * Per outcome, in the order given: what its line was charged, as USD text (its cost, or less
   * when the account's balance ran out; '0' for a retry), or null when it was not recorded (its
   * lease lost, or a second outcome for the same line).
   */
  charged: (string | null)[]
}

/** What one setWaiting call is given, as one value (DispatchStore.setWaiting). */
export interface WaitingChange {
  batchId: string
  waiting: BatchWaiting | null
  replaces?: readonly WaitingCode[]
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
   * How many lines of running batches wait to be dispatched (/metrics `multigrid_queue_depth`):
   * the pending lines of every batch in progress before its deadline, also those of an account
   * short of its holds (they run after a deposit); not those a spend cap holds back, which end
   * cancelled.
   */
  queuedLines(nowMs: number): Promise<number>
  /**
   * Leases up to `limit` pending lines of one batch, in line order. For a batch with a spend
   * cap, atomically against every other claim of it: only lines whose ceiling fits in
   * max_cost_usd − cost_usd − the ceilings of its lines in flight, taken in line order among
   * those that fit on their own until the next would not; each claimed ceiling is reserved until
   * its line is recorded or handed back. A capped claim that leaves a due line unable to fit sets
   * the batch waiting `max_cost_reached`, and one that takes lines with room to spare clears it.
   */
  claimLines(claim: LineClaim): Promise<ClaimedLine[]>
  /**
   * The batch's first pending line due by `nowMs` (marked for one of these batch lanes, if given), or
   * null: what a claim would take first, read without claiming it, so looking does not start the
   * batch (the batch lanes ask which lane a batch goes to this way).
   */
  nextLine(batchId: string, nowMs: number, lanes?: readonly string[]): Promise<NextLine | null>
  /**
   * These lines their batch lane does not take after all (the catalog changed since they were
   * stored): their mark is cleared, for the live lanes.
   */
  leaveLane(batchId: string, lineNos: readonly number[]): Promise<void>
  /** How many of the batch's pending lines are marked for these batch lanes. */
  laneLinesPending(batchId: string, lanes: readonly string[]): Promise<number>
  /** The statuses of these batches (missing ids are left out). */
  batchStatuses(ids: readonly string[]): Promise<Record<string, BatchStatus>>
  /** Extends every lease `owner` holds. */
  renewLeases(owner: string, leaseUntilMs: number): Promise<number>
  /**
   * Records outcomes of lines `owner` still leases, billing each in the same transaction, and
   * counts each settled line and its cost for its provider (providerShares). Outcomes for lines
   * whose lease was lost are ignored. `calls`: how the calls `owner` has in flight to each
   * provider changed since its last write. Answers how many were recorded and what each was
   * charged, which is what usage and metrics count.
   */
  recordOutcomes(
    owner: string,
    outcomes: readonly LineOutcome[],
    nowMs: number,
    calls?: readonly CallsChange[],
  ): Promise<RecordedOutcomes>
  /**
   * Graceful shutdown: gives back every line `owner` holds, untouched but for `unsent`: lines it
   * claimed and never sent (they waited for a slot), whose claim's attempt is handed back too.
   */
  releaseLeases(owner: string, unsent?: readonly LineKey[]): Promise<number>
  /** Returns lines whose lease ran out to pending. */
  reapExpiredLeases(nowMs: number): Promise<number>
  /**
   * Expires overdue batches and finalizes finished ones: the ids that changed status, and the
   * lines the pass ended without running them.
   */
  advanceBatches(nowSeconds: number): Promise<AdvancedBatches>
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
