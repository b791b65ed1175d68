/**
 * How fast one batch's lines complete on one offering, measured as they run, with the clock
 * passed in (so the planner's simulation in bench/plan.ts runs the same code in simulated time).
 *
 * The rate is Little's law over a recent window: the lines in service there, time-averaged, ÷
 * the mean time a line spends in service, × the share that succeeded. That is completions per
 * second, and it is right from the first answers on: counting completions in a window instead
 * reads a pool that answers in bursts (every request of a replica at one latency) as too fast or
 * too slow until the window has filled, and a wrong early rate spills lines for good.
 *
 * Both averages weigh the same recent stretch of time (exponentially, WINDOW_MS), and both are
 * exact averages from the first measurement on rather than averages that start at zero or at a
 * first sample: averaged over different stretches (5 s and the last ten answers), their ratio
 * swung ±10% on a busy event loop, and a slow first answer weighed for seconds
 * (test/planner/spill.test.ts), each swing spilling lines.
 */

/** How far back the averages look at least, ms (exponential weights): a capacity change shows within seconds. */
const WINDOW_MS = 5_000
/**
 * …and at least this many mean service times, so the average holds enough answers whatever the
 * latency: over 5 s a pool at 3.6 s a line gave about seven, their mean service time swung ±2%
 * with ±5% jitter, and each dip past the planner's tolerance spilled lines for good (bench/plan.ts
 * paid 0.2% over the margin's own price at 2×).
 */
const WINDOW_SERVICE_TIMES = 5

export interface Rate {
  /** Lines in service now. */
  running: number
  /** Completions per second; null before the first completion. */
  perSecond: number | null
}

interface Series {
  running: number
  /** ∫ running·w dt and ∫ w dt since the first start, w decaying with WINDOW_MS. */
  busy: number
  span: number
  at: number
  /** Σ w·service time, Σ w·succeeded and Σ w over completions. */
  service: number
  succeeded: number
  answers: number
  answeredAt: number
}

export class ThroughputMeter {
  private readonly series = new Map<string, Series>()

  /** A line started being served (it holds a slot of the offering). */
  started(key: string, now: number): void {
    this.advance(key, now).running++
  }

  /** A line served there ended after `serviceMs` in service; `ok` when it succeeded. */
  ended(key: string, now: number, serviceMs: number, ok: boolean): void {
    const s = this.advance(key, now)
    const decay = Math.exp(-(now - s.answeredAt) / windowOf(s))
    s.service = s.service * decay + Math.max(1, serviceMs)
    s.succeeded = s.succeeded * decay + (ok ? 1 : 0)
    s.answers = s.answers * decay + 1
    s.answeredAt = now
    s.running = Math.max(0, s.running - 1)
  }

  rate(key: string, now: number): Rate {
    const s = this.series.get(key)
    if (!s) return { running: 0, perSecond: null }
    this.advance(key, now)
    if (s.answers === 0 || s.span === 0) return { running: s.running, perSecond: null }
    const inService = s.busy / s.span
    const serviceMs = s.service / s.answers
    return {
      running: s.running,
      perSecond: (inService * (s.succeeded / s.answers) * 1000) / serviceMs,
    }
  }

  /** Forgets a key (its batch ended). */
  forget(key: string): void {
    this.series.delete(key)
  }

  private advance(key: string, now: number): Series {
    let s = this.series.get(key)
    if (!s) {
      s = {
        running: 0,
        busy: 0,
        span: 0,
        at: now,
        service: 0,
        succeeded: 0,
        answers: 0,
        answeredAt: now,
      }
      this.series.set(key, s)
      return s
    }
    const dt = now - s.at
    if (dt > 0) {
      // Over [at, now] running was constant: its weighted integral, and the weights' own.
      const window = windowOf(s)
      const decay = Math.exp(-dt / window)
      const weight = window * (1 - decay)
      s.busy = s.busy * decay + s.running * weight
      s.span = s.span * decay + weight
      s.at = now
    }
    return s
  }
}

function windowOf(s: Series): number {
  return s.answers === 0
    ? WINDOW_MS
    : Math.max(WINDOW_MS, (WINDOW_SERVICE_TIMES * s.service) / s.answers)
}
