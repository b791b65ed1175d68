/**
 * The dispatcher: claims pending lines through the store with leases and runs them upstream.
 * Earliest deadline first across batches, round-robin between accounts, bounded by the total
 * concurrency of the providers (each provider's own bound is its gate in Upstreams). Polling is
 * the source of truth; a nudge only wakes it sooner.
 */
import type { Catalog } from '../catalog/catalog.ts'
import type { DispatchStore, LineOutcome, RunnableBatch } from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'
import type { Upstreams } from '../upstream/upstreams.ts'
import { createRecorder } from './recorder.ts'
import type { RetryPolicy } from './retry-policy.ts'
import { runLine } from './run-line.ts'

const RUNNABLE_REUSE_MS = 200
/** A periodic task asked to run early does so at most this often. */
const EARLY_GAP_MS = 20

export interface DispatcherOptions {
  owner: string
  leaseSeconds: number
  pollMs: number
  retry: RetryPolicy
  /** SIGTERM: how long in-flight lines may take to finish before they are handed back. */
  drainMs: number
  /** Told of every outcome about to be recorded (metrics and debug logs). */
  onOutcome?: (outcome: LineOutcome) => void
}

export interface Dispatcher {
  start(): void
  nudge(): void
  /** A batch was cancelled on this instance: its waiting lines are not sent. */
  cancelled(batchId: string): void
  stop(): Promise<void>
  readonly inFlight: number
}

export function createDispatcher(
  store: DispatchStore,
  catalog: Catalog,
  upstreams: Upstreams,
  logger: Logger,
  options: DispatcherOptions,
): Dispatcher {
  const leaseMs = options.leaseSeconds * 1000
  const abort = new AbortController()
  /** Set when a batch's last line in flight here ended; the recorder's next write then asks for maintenance. */
  let lastLineOut = false
  let maintainSoon = () => {}
  const recorder = createRecorder(store, options.owner, logger, () => {
    if (!lastLineOut) return
    lastLineOut = false
    maintainSoon()
  })
  let running = false
  let inFlight = 0
  let rotation = 0
  let wake: (() => void) | null = null
  /** A nudge or a finished line that came while a tick ran: the loop looks again before sleeping. */
  let poked = false
  let loop: Promise<void> | null = null
  /** Batches with lines in flight here, and those of them that stopped dispatching. */
  const active = new Map<string, number>()
  const stopped = new Set<string>()
  /**
   * Accounts with a line over its ceiling seen here and not yet recorded: none of their lines is
   * claimed, and those claimed but not yet sent are handed back unsent, until the store has the
   * charge and its claim can tell whether the account's balance still covers its holds.
   */
  const overrunning = new Map<string, number>()
  /** Clears each periodic task's timers; `closed` once they are cleared. */
  const timers: (() => void)[] = []
  let closed = false

  const poke = () => {
    if (wake) wake()
    else poked = true
  }

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms)
      function done() {
        clearTimeout(timer)
        wake = null
        resolve()
      }
      wake = done
    })

  /** Spreads `free` slots over accounts in turn, each account's batches by deadline. */
  function plan(batches: RunnableBatch[], free: number) {
    const byAccount = new Map<string, RunnableBatch[]>()
    for (const batch of batches) {
      const list = byAccount.get(batch.accountId)
      if (list) list.push(batch)
      else byAccount.set(batch.accountId, [batch])
    }
    const accounts = [...byAccount.values()]
    const start = rotation++ % accounts.length
    const share = Math.max(1, Math.ceil(free / accounts.length))
    const claims: { batch: RunnableBatch; count: number }[] = []
    let left = free
    for (let i = 0; i < accounts.length && left > 0; i++) {
      let quota = Math.min(share, left)
      for (const batch of accounts[(start + i) % accounts.length]) {
        if (quota === 0) break
        const count = Math.min(quota, batch.pending)
        if (count === 0) continue
        claims.push({ batch, count })
        quota -= count
        left -= count
      }
    }
    return claims
  }

  /**
   * Lines claimed beyond the upstream slots wait at their provider's gate and start the moment a
   * slot frees, instead of a store round trip later. Half the slots again covers a claim that
   * waits its turn for the batch row on a busy PostgreSQL (measured: a quarter left 20–25% of
   * the slots idle there; SQLite does as well with either).
   */
  const capacity = upstreams.capacity()
  const target = capacity + Math.ceil(capacity / 2)
  // Claim in sizeable groups: one claim per line would make the store the bottleneck, and each
  // claim is a message that wakes the SQLite thread (or a PostgreSQL round trip holding the batch
  // row). A quarter of the slots still leaves a quarter waiting at the gate (measured, 256 slots:
  // 64 rather than 32 gave 1.5% more lines/s in each of five alternating pairs of runs).
  const minClaim = Math.min(64, Math.ceil(capacity / 4))

  /**
   * The last list of runnable batches, reused for a short while: the list only changes when a
   * batch is admitted (a nudge clears it) or runs short of lines (a claim that comes back short
   * clears it). Saves a store round trip on most claims.
   */
  let runnable: { batches: RunnableBatch[]; until: number } | null = null

  async function runnableBatches(now: number): Promise<RunnableBatch[]> {
    if (runnable && now < runnable.until) return runnable.batches
    const batches = await store.runnableBatches(now, 100)
    runnable = batches.length > 0 ? { batches, until: now + RUNNABLE_REUSE_MS } : null
    return batches
  }

  async function tick(): Promise<number> {
    const free = target - inFlight
    if (free < minClaim) return 0
    const now = Date.now()
    let batches = await runnableBatches(now)
    if (overrunning.size > 0) batches = batches.filter((batch) => !overrunning.has(batch.accountId))
    if (batches.length === 0) return 0
    let claimed = 0
    for (const { batch, count } of plan(batches, free)) {
      const batchId = batch.id
      const lines = await store.claimLines(batchId, options.owner, count, now, now + leaseMs)
      batch.pending -= lines.length
      if (lines.length < count) runnable = null
      claimed += lines.length
      for (const line of lines) {
        inFlight++
        active.set(line.batchId, (active.get(line.batchId) ?? 0) + 1)
        // Checked again once a slot is free: the line may have waited at the gate (claimed ahead,
        // or the provider paused by a 429) past a cancel or its batch's deadline.
        const proceed = () =>
          running && !stopped.has(line.batchId) && !overrunning.has(line.accountId) && Date.now() < line.deadlineAt * 1000
        runLine(line, { catalog, upstreams, retry: options.retry, signal: abort.signal, proceed })
          .then((outcome) => {
            // After shutdown's abort the line is handed back untouched, not failed.
            if (abort.signal.aborted) return
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
              holdBackUntilRecorded(line.accountId, outcome)
            } else recorder.add(outcome)
            options.onOutcome?.(outcome)
          })
          .catch((error) => {
            logger.error('dispatch.line_crashed', { batch_id: line.batchId, line: line.lineNo, error: String(error) })
            if (abort.signal.aborted) return
            // A bug must not leave the line running forever under a lease this instance keeps
            // renewing (its batch would never finish); it would crash again if retried.
            recorder.add({
              batchId: line.batchId,
              lineNo: line.lineNo,
              kind: 'failed',
              error: { code: 'upstream_error', message: 'the gateway failed while running this line (logged as dispatch.line_crashed); nothing was billed' },
              responseStatus: null,
              costUsd: '0',
              provider: null,
              latencyMs: null,
            })
          })
          .finally(() => {
            const left = active.get(line.batchId)! - 1
            if (left === 0) {
              active.delete(line.batchId)
              // Its last line here: once recorded, the batch may be done.
              lastLineOut = true
            } else active.set(line.batchId, left)
            inFlight--
            // Wakes the claim loop once a claim's worth of room is free, not on every line.
            if (target - inFlight >= minClaim) poke()
          })
      }
    }
    return claimed
  }

  /** Records an overrunning line's outcome at once, the account's other lines held back meanwhile. */
  function holdBackUntilRecorded(accountId: string, outcome: LineOutcome) {
    overrunning.set(accountId, (overrunning.get(accountId) ?? 0) + 1)
    recorder.add(outcome)
    recorder.flush().finally(() => {
      const left = overrunning.get(accountId)! - 1
      if (left === 0) overrunning.delete(accountId)
      else overrunning.set(accountId, left)
      runnable = null
      poke()
    })
  }

  async function run() {
    while (running) {
      let claimed = 0
      poked = false
      try {
        claimed = await tick()
      } catch (error) {
        logger.warn('dispatch.tick_failed', { reason: (error as Error).message })
      }
      if (!running) break
      // Full: wait for a slot. Idle: wait for a nudge or the poll interval.
      if ((claimed === 0 || inFlight >= target) && !poked) await sleep(options.pollMs)
    }
  }

  /**
   * Runs `task` every `ms`, never two at once. The function returned runs it early, at most every
   * EARLY_GAP_MS (or right after the run under way); a task that resolves `true` asks for that
   * itself.
   */
  const every = (ms: number, task: () => Promise<unknown>, name: string) => {
    let busy = false
    let again = false
    let lastRun = 0
    let early: ReturnType<typeof setTimeout> | null = null
    const run = async () => {
      if (early) clearTimeout(early)
      early = null
      if (busy) return
      busy = true
      lastRun = performance.now()
      try {
        if ((await task()) === true) again = true
      } catch (error) {
        logger.warn(`dispatch.${name}_failed`, { reason: (error as Error).message })
      } finally {
        busy = false
      }
      if (again) {
        again = false
        soon()
      }
    }
    const soon = () => {
      if (closed) return
      if (busy) again = true
      else early ??= setTimeout(run, Math.max(0, lastRun + EARLY_GAP_MS - performance.now()))
    }
    const interval = setInterval(run, ms)
    timers.push(() => {
      clearInterval(interval)
      if (early) clearTimeout(early)
    })
    return soon
  }

  return {
    get inFlight() {
      return inFlight
    },
    start() {
      if (running) return
      running = true
      loop = run()
      every(Math.max(200, leaseMs / 3), () => store.renewLeases(options.owner, Date.now() + leaseMs), 'heartbeat')
      // Leases run out in seconds: looking for them more often than a quarter lease is waste.
      every(Math.max(1000, leaseMs / 4), () => store.reapExpiredLeases(Date.now()), 'reaper')
      // Bounded below too: a fast poll interval must not turn maintenance into a busy loop.
      // Also run soon after a batch's last line here was recorded, and again after each pass that
      // moved a batch (which takes `finalizing` on to its end), so a finished batch completes
      // within milliseconds instead of up to two intervals later.
      maintainSoon = every(Math.min(Math.max(options.pollMs, 200), 1000), async () => {
        // Cancels made on any instance reach lines still waiting for a slot here.
        const statuses = await store.batchStatuses([...active.keys()])
        for (const [id, status] of Object.entries(statuses)) if (status !== 'in_progress') stopped.add(id)
        for (const id of stopped) if (!active.has(id)) stopped.delete(id)
        const changed = await store.advanceBatches(Math.floor(Date.now() / 1000))
        for (const id of changed) logger.info('batch.status_changed', { batch_id: id })
        return changed.length > 0
      }, 'maintenance')
    },
    nudge() {
      runnable = null
      poke()
    },
    cancelled(batchId) {
      stopped.add(batchId)
    },
    async stop() {
      running = false
      wake?.()
      await loop
      const deadline = Date.now() + options.drainMs
      while (inFlight > 0 && Date.now() < deadline) await Bun.sleep(20)
      abort.abort(new Error('gateway shutting down'))
      await recorder.flush()
      closed = true
      for (const clear of timers) clear()
      const released = await store.releaseLeases(options.owner)
      logger.info('dispatch.stopped', { released, abandoned: inFlight })
    },
  }
}
