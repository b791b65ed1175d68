/**
 * The dispatcher: claims pending lines through the store with leases and runs them upstream.
 * What to claim is the claim allocator's choice (earliest deadline first, round-robin between
 * accounts, bounded by the total concurrency of the providers; each provider's own bound is its
 * gate in Upstreams). Polling is the source of truth; a nudge only wakes it sooner. Leases are
 * renewed, expired ones reaped and batches moved on by periodic tasks beside the claim loop.
 */
import type { FineTuneRecord } from '../catalog/fine-tunes.ts'
import type { FleetRates, Shares } from '../coordination/fleet-rates.ts'
import type { Catalog } from '../catalog/catalog.ts'
import type { SchemaChecks } from '../schemas/schema-checks.ts'
import type {
  ClaimedLine,
  DispatchStore,
  LineOutcome,
  LinesEnded,
  RunnableBatch,
} from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'
import type { Upstreams } from '../upstream/upstreams.ts'
import { maintainBatches } from './batch-maintenance.ts'
import { createClaimAllocator, type ClaimAllocator } from './claim-allocator.ts'
import { createPeriodicTask, type PeriodicTask } from './periodic-task.ts'
import { plannedSend } from './planned-send.ts'
import { createRecorder, type Recorder } from './recorder.ts'
import type { RetryPolicy } from './retry-policy.ts'
import { runLine, type RunLineDeps } from './run-line.ts'
import { createSpillPlanner, type SpillPlanner, type TakenRoom } from './spill-planner.ts'
import { Tally } from './tally.ts'
import { LinesByBatch } from './lines-by-batch.ts'
import { createWakeSignal, type WakeSignal } from './wake-signal.ts'
import { BatchPace } from './batch-pace.ts'
import { createWaitingReporter, type WaitingReporter } from './waiting-reporter.ts'
import { pauseMsAfter } from '../upstream/upstreams.ts'
import type { LaneBatches } from './batch-lane/lane-batches.ts'
import { StoppedBatches } from './stopped-batches.ts'

const RUNNABLE_REUSE_MS = 200
/** A batch none of whose lines was launched here for this long is forgotten by the planner. */
const FORGET_AFTER_MS = 10_000
/** A periodic task asked to run early does so at most this often. */
const EARLY_GAP_MS = 20

export interface DispatcherOptions {
  owner: string
  leaseSeconds: number
  pollMs: number
  retry: RetryPolicy
  /** SIGTERM: how long in-flight lines may take to finish before they are handed back. */
  drainMs: number
  /** Told of every outcome about to be recorded (debug logs). */
  onOutcome?: (outcome: LineOutcome, line: ClaimedLine) => void
  /**
   * Told of every outcome once recorded, with what its line was charged (usage and metrics):
   * not of one whose lease was lost meanwhile (the instance that has the line now tells of it).
   */
  onCharged?: (outcome: LineOutcome, line: ClaimedLine, chargedUsd: string) => void
  /** Told of the lines a maintenance pass ended without running them (expired, cancelled). */
  onLinesEnded?: (ended: LinesEnded) => void
  /** The spill planner's safety margin, a share of each batch's window (MULTIGRID_SPILL_MARGIN). */
  spillMargin: number
  /** Fine-tunes by `ft:` id, for lines that name one (docs/open-models.md). */
  fineTunes?: (id: string) => Promise<FineTuneRecord | null>
  /** Where answers are judged against their line's json_schema (docs/structured-outputs.md); unset: in-process. */
  schemaChecks?: SchemaChecks
  /** In a fleet (REDIS_URL): the planner's rates shared with the other instances. */
  fleetRates?: FleetRates
  /** With batch lanes (docs/batch-lanes.md): the batches their engine serves are left to it. */
  laneBatches?: LaneBatches
  /** Why batches wait, shared with the batch lanes, whose reasons a line that ends here clears. */
  waiting?: WaitingReporter
}

export interface Dispatcher {
  start(): void
  nudge(): void
  /** A batch was cancelled on this instance: its waiting lines are not sent. */
  cancelled(batchId: string): void
  stop(): Promise<void>
  readonly inFlight: number
}

/** What the dispatcher works with. */
export interface DispatcherDeps {
  store: DispatchStore
  catalog: Catalog
  upstreams: Upstreams
  logger: Logger
}

/**
 * What the dispatcher's steps share: its parts, and the state that changes as lines run. One
 * dispatcher has one; the steps below are module functions over it, so each can be read (and
 * reached) on its own.
 */
interface DispatchState extends DispatcherDeps {
  options: DispatcherOptions
  leaseMs: number
  abort: AbortController
  allocator: ClaimAllocator
  /** Batches given their first claim before the planner saw one of their lines (bounded). */
  firstClaims: Set<string>
  spill: SpillPlanner
  wake: WakeSignal
  running: boolean
  loop: Promise<void> | null
  inFlight: number
  /** Batches with lines in flight here, and those of them that stopped dispatching. */
  active: Tally
  stopped: StoppedBatches
  /**
   * Accounts with a line over its ceiling seen here and not yet recorded: none of their lines is
   * claimed, and those claimed but not yet sent are handed back unsent, until the store has the
   * charge and its claim can tell whether the account's balance still covers its holds.
   */
  overrunning: Tally
  /** Each batch's lines pending in the store, as the claims last saw them (for the ETA). */
  knownPending: Map<string, number>
  /** What was last written of each batch's ETA. */
  lastEta: Map<string, number | null>
  /** Batches with a line kept for a batch lane that has closed, by deadline (s): their ETA. */
  heldToDeadline: Map<string, number>
  /** Every line's RunLineDeps.laneClosed, made once. */
  laneClosed: NonNullable<RunLineDeps['laneClosed']>
  // The planner's projection, written when it moved by more than a little (not on every pass),
  // and why a batch's lines wait as far as the planner knows (all of its providers unreachable,
  // or full with other batches' lines); the reporter clears it once a line of the batch ends.
  pace: BatchPace
  maintenance: PeriodicTask
  /** Set when a batch's last line in flight here ended; the recorder's next write then asks for maintenance. */
  lastLineOut: boolean
  recorder: Recorder
  waiting: WaitingReporter
  spillSend: ReturnType<typeof plannedSend>
  /**
   * The last list of runnable batches, reused for a short while: the list only changes when a
   * batch is admitted (a nudge clears it) or runs short of lines (a claim that comes back short
   * clears it). Saves a store round trip on most claims.
   */
  runnable: { batches: RunnableBatch[]; until: number } | null
  /** Batches this instance said wait `capacity_busy` with none of their lines claimed anywhere. */
  busyUnclaimed: Set<string>
  /** Lines launched here and not sent yet (waiting for a slot), by batch: handed back unsent at a stop. */
  unsent: LinesByBatch
}

export function createDispatcher(deps: DispatcherDeps, options: DispatcherOptions): Dispatcher {
  const { store, upstreams, logger } = deps
  const leaseMs = options.leaseSeconds * 1000
  const spill = createSpillPlanner({
    marginShare: options.spillMargin,
    available: upstreams.available,
    unreachable: upstreams.unreachable,
    pausedUntil: upstreams.pausedUntil,
    limit: (provider) => upstreams.gate(provider).limit,
    fleet: options.fleetRates !== undefined,
  })
  const active = new Tally()
  const abort = new AbortController()
  const stopped = new StoppedBatches(abort.signal)

  const every = (ms: number, task: () => Promise<unknown>, name: string, chainGapMs?: number) =>
    createPeriodicTask(task, {
      everyMs: ms,
      earlyGapMs: EARLY_GAP_MS,
      chainGapMs,
      onError: (error) => logger.warn(`dispatch.${name}_failed`, { reason: error.message }),
    })
  const heartbeat = every(
    Math.max(200, leaseMs / 3),
    () => store.renewLeases(options.owner, Date.now() + leaseMs),
    'heartbeat',
  )
  // Leases run out in seconds: looking for them more often than a quarter lease is waste.
  const reaper = every(
    Math.max(1000, leaseMs / 4),
    () => store.reapExpiredLeases(Date.now()),
    'reaper',
  )
  // Bounded below too: a fast poll interval must not turn maintenance into a busy loop. Also run
  // soon after a batch's last line here was recorded, and again after each pass that moved a
  // batch (which takes `finalizing` on to its end), so a finished batch completes within
  // milliseconds instead of up to two intervals later. The pass after one that moved a batch runs
  // at once: a batch's `finalizing` lasts one pass, not one pass and a gap.
  const maintenance = every(
    Math.min(Math.max(options.pollMs, 200), 1000),
    () =>
      maintainBatches(store, {
        logger,
        here: active,
        stopped,
        onLinesEnded: options.onLinesEnded,
      }),
    'maintenance',
    0,
  )
  const projection = every(1000, () => writeProjection(state), 'projection')
  const tasks = [heartbeat, reaper, maintenance, projection]

  const recorder = createRecorder(store, options.owner, logger, {
    written() {
      // Not while outcomes wait for the recorder's next write (the write under way when the last
      // line ended took the ones before it): the batch's last outcome may be among them.
      if (!state.lastLineOut || recorder.pending > 0) return
      state.lastLineOut = false
      maintenance.soon()
    },
    charged: options.onCharged,
  })
  const waiting = options.waiting ?? createWaitingReporter(store, logger)
  // Batch lines go through the planner, which tells of their calls: calls in flight per provider
  // for routing.providers, and what makes a batch wait.
  const unsent = new LinesByBatch()
  const spillSend = plannedSend(upstreams, spill, {
    started(line, provider) {
      unsent.delete(line.batchId, line.lineNo)
      recorder.call(line.batchId, provider, 1)
    },
    ended(line, provider, outcome) {
      recorder.call(line.batchId, provider, -1)
      if (!outcome || outcome.ok) return
      if (outcome.error.kind === 'rate_limited') {
        waiting.rateLimited(line.batchId, provider, Date.now() + pauseMsAfter(outcome.error))
      } else if (outcome.error.retryable && upstreams.unreachable(provider)) {
        waiting.unavailable(line.batchId, provider)
      }
    },
    // A 429 that is busy, not a rate limit (flex out of capacity): the lines wait on it all the
    // same, and say so. A pool's 503 is its queue, as full slots are: no reason of its own.
    busy(line, provider, error, retryAtMs) {
      if (error.status === 429) waiting.busy(line.batchId, provider, retryAtMs)
    },
  })

  const state: DispatchState = {
    ...deps,
    options,
    leaseMs,
    abort,
    allocator: createClaimAllocator({ capacity: upstreams.capacity() }),
    firstClaims: new Set(),
    spill,
    wake: createWakeSignal(),
    running: false,
    loop: null,
    inFlight: 0,
    active,
    stopped,
    overrunning: new Tally(),
    knownPending: new Map(),
    lastEta: new Map(),
    heldToDeadline: new Map(),
    pace: new BatchPace(),
    unsent,
    maintenance,
    lastLineOut: false,
    recorder,
    waiting,
    spillSend,
    runnable: null,
    busyUnclaimed: new Set(),
    laneClosed: (line, lane, closedAtMs) => heldToDeadline(state, line, lane, closedAtMs),
  }

  return {
    get inFlight() {
      return state.inFlight
    },
    start() {
      if (state.running) return
      state.running = true
      state.loop = run(state)
      for (const task of tasks) task.start()
    },
    nudge() {
      state.runnable = null
      state.wake.poke()
    },
    cancelled(batchId) {
      stopped.add(batchId)
    },
    stop: () => stopDispatcher(state, tasks),
  }
}

/**
 * The batch's finish at the pace its lines end here, with what the other instances measure
 * added (docs/routing.md eta, Unix seconds); null before the first of them ended.
 */
function projectEta(
  { spill, pace }: DispatchState,
  batchId: string,
  remaining: number,
  now: number,
): number | null {
  // None left that this instance can see (all claimed elsewhere, or held back by a cap): it
  // cannot tell.
  if (remaining === 0) return null
  const mine = pace.rate(batchId, now)
  // Before a stretch of answers to measure: the planner's rates of the offerings.
  if (mine === null) return spill.eta(batchId, remaining, now)
  const rate = mine + spill.othersRate(batchId, now)
  return rate > 0 ? Math.ceil((now + (remaining / rate) * 1000) / 1000) : null
}

/**
 * A line of the batch keeps to a batch lane that has closed (run-line.ts): it waits for the
 * deadline, so the batch ends no sooner. That is its ETA, and why it waits.
 */
function heldToDeadline(
  state: DispatchState,
  line: ClaimedLine,
  lane: string,
  closedAtMs: number,
): void {
  const { batchId, deadlineAt } = line
  state.waiting.laneClosed(batchId, lane, { closedAtMs, deadlineMs: deadlineAt * 1000 })
  if (state.heldToDeadline.get(batchId) === deadlineAt) return
  if (state.heldToDeadline.size >= 10_000) state.heldToDeadline.clear()
  state.heldToDeadline.set(batchId, deadlineAt)
  state.lastEta.set(batchId, deadlineAt)
  state.store
    .recordEtas([{ batchId, eta: deadlineAt }])
    .catch((error: Error) =>
      state.logger.warn('dispatch.eta_failed', { batch_id: batchId, reason: error.message }),
    )
}

/** The projection task: each batch's ETA when it moved, and why its lines wait. */
async function writeProjection(state: DispatchState) {
  const { spill, active, lastEta, pace, knownPending, options, waiting, store } = state
  const now = Date.now()
  // The pending counts as the claims last saw them. Not the claims' cached list: it is
  // cleared after every short claim, and a batch whose lines are all claimed is not in it,
  // which left the ETA unwritten for whole runs.
  const pending = knownPending
  const etas: { batchId: string; eta: number | null }[] = []
  for (const id of spill.batchIds()) {
    // Gone from here: no line in flight here, none claimed for a while.
    if (!active.has(id) && spill.lastSeen(id) < now - FORGET_AFTER_MS) {
      lastEta.delete(id)
      state.heldToDeadline.delete(id)
      spill.forget(id)
      pace.forget(id)
      knownPending.delete(id)
    }
  }
  if (options.fleetRates) {
    const mine: Shares = new Map(spill.batchIds().map((id) => [id, spill.localShares(id, now)]))
    const others = await options.fleetRates.exchange(mine, now)
    for (const [id, shares] of others) spill.fleetShares(id, shares, now)
  }
  for (const id of spill.batchIds()) {
    const eta =
      pending &&
      (state.heldToDeadline.get(id) ??
        projectEta(state, id, (pending.get(id) ?? 0) + active.count(id), now))
    const last = lastEta.get(id)
    if (
      pending &&
      (last === undefined || (last === null) !== (eta === null) || Math.abs(eta! - last!) > 1)
    )
      etas.push({ batchId: id, eta })
    const reason = spill.waiting(id, now)
    if (reason?.code === 'provider_unavailable') waiting.unavailable(id, reason.providers)
    else if (reason?.code === 'provider_rate_limited')
      waiting.rateLimited(id, reason.providers, reason.untilMs)
    else if (reason?.code === 'capacity_busy') waiting.capacityBusy(id, reason.providers)
  }
  if (etas.length > 0) await store.recordEtas(etas)
  for (const { batchId, eta } of etas) lastEta.set(batchId, eta)
  await reportUnclaimed(state, now)
}

/**
 * Batches none of whose lines could be claimed while this instance has no room for more, or
 * while the planner gives them no room at their offerings (the instance has room, but their pool
 * is full), that room taken by lines of batches due no later: they wait `capacity_busy` as surely
 * as lines waiting at a full provider's gate (docs/routing.md), though the planner has none of
 * them to see. Cleared once their lines run anywhere (the store's count of running lines tells
 * of other instances), or nothing here is ahead of them any more.
 */
async function reportUnclaimed(state: DispatchState, now: number) {
  const { allocator, spill, active, waiting } = state
  const still = new Set<string>()
  const full = !allocator.hasRoom(state.inFlight)
  // With room here, a batch waits behind another only when the planner knows two of them.
  const batches = full || spill.batchIds().length > 1 ? await runnableBatches(state, now) : []
  for (const batch of batches) {
    if (batch.running > 0 || active.has(batch.id)) continue
    const ahead = full
      ? spill.busyAhead(batch.id, batch.deadlineAt)
      : spill.room(batch, batch.pending, now) === 0
        ? spill.busyAhead(batch.id, batch.deadlineAt, true)
        : null
    if (ahead === null) continue
    still.add(batch.id)
    waiting.capacityBusy(batch.id, ahead)
  }
  // The planner's own reason, once its lines wait at a gate here, is left standing.
  for (const id of state.busyUnclaimed)
    if (!still.has(id) && spill.waiting(id, now) === null) waiting.capacityFreed(id)
  state.busyUnclaimed = still
}

async function runnableBatches(state: DispatchState, now: number): Promise<RunnableBatch[]> {
  const { store, knownPending, options } = state
  if (state.runnable && now < state.runnable.until) return state.runnable.batches
  const listed = await store.runnableBatches(now, 100)
  const batches = options.laneBatches ? await options.laneBatches.liveOnly(listed, now) : listed
  // A batch known here and absent now has no line pending (a full list may leave some out).
  if (listed.length < 100) for (const id of knownPending.keys()) knownPending.set(id, 0)
  for (const b of batches) knownPending.set(b.id, b.pending)
  state.runnable = batches.length > 0 ? { batches, until: now + RUNNABLE_REUSE_MS } : null
  return batches
}

/** Lines claimed of a batch before the planner has seen one of its lines. */
const FIRST_CLAIM = 1
const MAX_FIRST_CLAIMS = 10_000

/** Notes a batch's first claim; the oldest notes go first past the bound. */
function rememberFirstClaim(firstClaims: Set<string>, batchId: string) {
  if (firstClaims.size >= MAX_FIRST_CLAIMS) firstClaims.delete(firstClaims.values().next().value!)
  firstClaims.add(batchId)
}

async function tick(state: DispatchState): Promise<number> {
  const { allocator, store, options, leaseMs, knownPending, overrunning } = state
  // The room as it was before the store was asked: lines that end meanwhile leave theirs to the next turn.
  const inFlightNow = state.inFlight
  if (!allocator.hasRoom(inFlightNow)) return 0
  const now = Date.now()
  const batches = await runnableBatches(state, now)
  let claimed = 0
  // The offerings' room given to each batch, so the batches after it do not count it again.
  const taken: TakenRoom = new Map()
  for (const { batch, count } of allocator.allocate({
    now,
    batches,
    inFlight: inFlightNow,
    heldBack: overrunning,
    // A batch not planned here yet: one line, whose launch tells the planner its offerings, and
    // the next turn (at once) claims the room they have. More lines taken blind could fill the
    // gate of a pool that lines of batches due earlier are waiting for.
    room: (batch) =>
      state.spill.lastSeen(batch.id) === 0 && !state.firstClaims.has(batch.id)
        ? FIRST_CLAIM
        : state.spill.room(batch, batch.pending, now, taken),
    took(batch, count) {
      // Once: lines that never reach the planner (kept for a lane, refused) must not leave the
      // batch claimed a line a turn.
      if (state.spill.lastSeen(batch.id) === 0) rememberFirstClaim(state.firstClaims, batch.id)
      state.spill.take(batch, count, { unsent: batch.pending, nowMs: now }, taken)
    },
  })) {
    const lines = await store.claimLines({
      batchId: batch.id,
      owner: options.owner,
      limit: count,
      nowMs: now,
      leaseUntilMs: now + leaseMs,
      lanes: batch.leaveToLanes ? { except: batch.leaveToLanes } : undefined,
    })
    batch.pending -= lines.length
    knownPending.set(batch.id, batch.pending)
    if (lines.length < count) state.runnable = null
    claimed += lines.length
    // Each line's offering is chosen as it is launched: the lines after it are not sent yet.
    for (let i = 0; i < lines.length; i++)
      launch(state, lines[i], batch, batch.pending + lines.length - i)
  }
  return claimed
}

/** Runs one claimed line to its outcome, in the background. */
function launch(state: DispatchState, line: ClaimedLine, batch: RunnableBatch, unsent: number) {
  const { catalog, upstreams, options, abort, active, stopped, overrunning, pace } = state
  const { knownPending, waiting, recorder, logger, spill, spillSend, allocator, wake } = state
  state.inFlight++
  active.add(line.batchId)
  state.unsent.add(line.batchId, line.lineNo)
  pace.started(line.batchId, Date.now())
  // Checked again once a slot is free: the line may have waited at the gate (claimed ahead,
  // or the provider paused by a 429) past a cancel or its batch's deadline.
  const proceed = () =>
    state.running &&
    !stopped.has(line.batchId) &&
    !overrunning.has(line.accountId) &&
    Date.now() < line.deadlineAt * 1000
  runLine(line, {
    catalog,
    upstreams,
    retry: options.retry,
    signal: abort.signal,
    waitSignal: stopped.waitSignal(line.batchId),
    proceed,
    plan: { planner: spill, upstreams: spillSend, batch, unsent },
    fineTunes: options.fineTunes,
    schemaChecks: options.schemaChecks,
    laneClosed: state.laneClosed,
  })
    .then((outcome) => {
      // Settled: a stop's hand-back of unsent lines must not count it again.
      state.unsent.delete(line.batchId, line.lineNo)
      // After shutdown's abort the line is handed back untouched, not failed.
      if (abort.signal.aborted) return
      if (outcome.kind !== 'retry') {
        pace.completed(line.batchId, Date.now())
        waiting.progressed(line.batchId, outcome.provider)
      } else {
        // Back to pending: still to do, as the ETA counts (until the next list says).
        knownPending.set(line.batchId, (knownPending.get(line.batchId) ?? 0) + 1)
      }
      if (outcome.kind === 'succeeded' && outcome.ceilingUsd !== undefined) {
        // Billed in full all the same; the account stops being dispatched once its credit
        // no longer covers what it holds (the store's claim checks that).
        logger.warn('line.cost_overrun', {
          batch_id: line.batchId,
          account_id: line.accountId,
          line: line.lineNo,
          provider: outcome.provider,
          ceiling_usd: outcome.ceilingUsd,
          cost_usd: outcome.costUsd,
        })
        holdBackUntilRecorded(state, line, outcome)
      } else recorder.add(outcome, line)
      options.onOutcome?.(outcome, line)
    })
    .catch((error) => {
      state.unsent.delete(line.batchId, line.lineNo)
      // Shutdown's abort, met waiting for a slot or upstream: handed back, no crash.
      if (abort.signal.aborted) return
      logger.error('dispatch.line_crashed', {
        batch_id: line.batchId,
        line: line.lineNo,
        error: String(error),
      })
      // A bug must not leave the line running forever under a lease this instance keeps
      // renewing (its batch would never finish); it would crash again if retried. Counted as
      // any failed line is.
      recorder.add(
        {
          batchId: line.batchId,
          lineNo: line.lineNo,
          kind: 'failed',
          error: {
            code: 'internal_error',
            message:
              'the gateway failed while running this line (logged as dispatch.line_crashed); nothing was billed',
          },
          responseStatus: null,
          costUsd: '0',
          provider: null,
          latencyMs: null,
        },
        line,
      )
    })
    .finally(() => {
      // Its last line here: once recorded, the batch may be done.
      // Written at once rather than at the recorder's next tick: nothing else of the batch is
      // coming from here to share the write with.
      if (active.remove(line.batchId)) {
        stopped.settled(line.batchId)
        state.lastLineOut = true
        recorder.flushSoon()
      }
      state.inFlight--
      // Wakes the claim loop once a claim's worth of room is free, not on every line.
      if (allocator.hasRoom(state.inFlight)) wake.poke()
    })
}

/** Records an overrunning line's outcome at once, the account's other lines held back meanwhile. */
function holdBackUntilRecorded(state: DispatchState, line: ClaimedLine, outcome: LineOutcome) {
  const { overrunning, recorder } = state
  overrunning.add(line.accountId)
  recorder.add(outcome, line)
  recorder.flush().finally(() => {
    overrunning.remove(line.accountId)
    state.runnable = null
    state.wake.poke()
  })
}

/** The claim loop. */
async function run(state: DispatchState) {
  const { wake, logger, allocator, options } = state
  while (state.running) {
    let claimed = 0
    // A poke from before this turn is answered by it.
    wake.takePoke()
    try {
      claimed = await tick(state)
    } catch (error) {
      logger.warn('dispatch.tick_failed', { reason: (error as Error).message })
    }
    if (!state.running) break
    // Full: wait for a slot. Idle: wait for a nudge or the poll interval.
    if ((claimed === 0 || allocator.isFull(state.inFlight)) && !wake.takePoke())
      await wake.sleep(options.pollMs)
  }
}

/** SIGTERM: stop claiming, let lines in flight finish within drainMs, hand the rest back. */
async function stopDispatcher(state: DispatchState, tasks: PeriodicTask[]) {
  const { options, abort, recorder, store, logger } = state
  state.running = false
  state.wake.poke()
  await state.loop
  const deadline = Date.now() + options.drainMs
  while (state.inFlight > 0 && Date.now() < deadline) await Bun.sleep(20)
  // Still waiting for a slot when the drain ends: never sent, so the attempt each claim counted
  // is handed back with the line (the abort leaves them unrecorded).
  const unsent = state.unsent.keys()
  abort.abort(new Error('gateway shutting down'))
  await recorder.flush()
  for (const task of tasks) task.stop()
  const released = await store.releaseLeases(options.owner, unsent)
  logger.info('dispatch.stopped', { released, abandoned: state.inFlight })
}
