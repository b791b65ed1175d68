/**
 * A task run every few milliseconds in the background (the dispatcher's lease heartbeat, lease
 * reaper and batch maintenance), never two runs at once: a run still going when the interval
 * comes round makes that tick a no-op rather than a second run beside it.
 */

/** A periodic task made by `createPeriodicTask`; it does nothing until `start()`. */
export interface PeriodicTask {
  start(): void
  /**
   * Runs the task early: at most every `earlyGapMs` (counted from the last run's start), or right
   * after the run under way ends. Before `start()` and after `stop()` it does nothing.
   */
  soon(): void
  /** Clears the timers; a run under way finishes, and nothing runs after it. */
  stop(): void
}

export interface PeriodicTaskOptions {
  everyMs: number
  /** The shortest gap between a run and an early one asked for by `soon()`. */
  earlyGapMs: number
  /**
   * The gap before the run asked for by a run that resolved `true` (a chain of steps); defaults to
   * `earlyGapMs`. 0 takes each step right after the one before it.
   */
  chainGapMs?: number
  /** Told of a run that threw or rejected; the task keeps its schedule. */
  onError: (error: Error) => void
}

/**
 * `task` resolving `true` asks for another run soon (for example: it moved something, and the
 * next run takes that further), so a chain of steps takes milliseconds, not intervals.
 */
export function createPeriodicTask(
  task: () => Promise<unknown>,
  options: PeriodicTaskOptions,
): PeriodicTask {
  let started = false
  let stopped = false
  let busy = false
  let again = false
  let lastRun = 0
  let interval: ReturnType<typeof setInterval> | null = null
  let early: ReturnType<typeof setTimeout> | null = null

  const run = async () => {
    if (early) clearTimeout(early)
    early = null
    if (busy) return
    busy = true
    lastRun = performance.now()
    let chained = false
    try {
      chained = (await task()) === true
    } catch (error) {
      options.onError(error instanceof Error ? error : new Error(String(error)))
    } finally {
      busy = false
    }
    if (chained) {
      again = false
      soon(options.chainGapMs ?? options.earlyGapMs)
    } else if (again) {
      again = false
      soon()
    }
  }

  const soon = (gapMs = options.earlyGapMs) => {
    if (!started || stopped) return
    if (busy) again = true
    else early ??= setTimeout(run, Math.max(0, lastRun + gapMs - performance.now()))
  }

  return {
    start() {
      if (started || stopped) return
      started = true
      interval = setInterval(run, options.everyMs)
    },
    soon: () => soon(),
    stop() {
      stopped = true
      if (interval) clearInterval(interval)
      if (early) clearTimeout(early)
      interval = early = null
    },
  }
}
