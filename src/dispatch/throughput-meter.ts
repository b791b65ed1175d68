/**
 * How fast one batch's lines complete on one offering, measured as they run, with the clock
 * passed in (so the planner's simulation in bench/plan.ts runs the same code in simulated time).
 *
 * The rate is Little's law over a recent window: the lines in service there (time-averaged) ÷
 * their mean service time, × the share that succeeded. That is completions per second in steady
 * state, and it is right from the first answers on: counting completions in a window instead reads
 * a pool that answers in bursts (every request of a replica at one latency) as far too fast or
 * too slow until the window has filled, and a wrong early rate spills lines for good.
 */

/** Time constant of the averages, ms: a capacity change shows within a few seconds. */
const WINDOW_MS = 5_000
/** Weight of each new completion in the mean service time and the success share. */
const SAMPLE_WEIGHT = 0.1

export interface Rate {
  /** Lines in service now. */
  running: number
  /** Completions per second; null before the first completion. */
  perSecond: number | null
}

interface Series {
  running: number
  /** Time-averaged running (continuous-time exponential average). */
  meanRunning: number
  at: number
  /** Mean service time, ms; null before the first completion. */
  serviceMs: number | null
  successShare: number
}

export class ThroughputMeter {
  private readonly series = new Map<string, Series>()

  /** A line started being served (it holds a slot of the offering). */
  started(key: string, now: number): void {
    const s = this.advance(key, now)
    s.running++
    // Before any completion the average is the count itself: nothing earlier to average over.
    if (s.serviceMs === null) s.meanRunning = s.running
  }

  /** A line served there ended, after `serviceMs` in service; `ok` when it succeeded. */
  ended(key: string, now: number, serviceMs: number, ok: boolean): void {
    const s = this.advance(key, now)
    if (s.serviceMs === null) {
      s.serviceMs = Math.max(1, serviceMs)
      s.successShare = ok ? 1 : 0
      s.meanRunning = s.running
    } else {
      s.serviceMs += (Math.max(1, serviceMs) - s.serviceMs) * SAMPLE_WEIGHT
      s.successShare += ((ok ? 1 : 0) - s.successShare) * SAMPLE_WEIGHT
    }
    s.running = Math.max(0, s.running - 1)
  }

  rate(key: string, now: number): Rate {
    const s = this.series.get(key)
    if (!s) return { running: 0, perSecond: null }
    this.advance(key, now)
    if (s.serviceMs === null) return { running: s.running, perSecond: null }
    return { running: s.running, perSecond: (s.meanRunning * s.successShare * 1000) / s.serviceMs }
  }

  /** Forgets a key (its batch ended). */
  forget(key: string): void {
    this.series.delete(key)
  }

  private advance(key: string, now: number): Series {
    let s = this.series.get(key)
    if (!s) {
      s = { running: 0, meanRunning: 0, at: now, serviceMs: null, successShare: 1 }
      this.series.set(key, s)
      return s
    }
    const dt = now - s.at
    if (dt > 0) {
      s.meanRunning += (s.running - s.meanRunning) * (1 - Math.exp(-dt / WINDOW_MS))
      s.at = now
    }
    return s
  }
}
