/**
 * The working point of one replica of a provider with `adaptive_concurrency` (docs/routing.md): how many
 * calls it should have in flight, found from what its calls show, between 1 and the provider's
 * `max_concurrency`. Pure: no timers, no I/O; the clock comes in with each observation.
 *
 * - Slow start: while nothing said "too much", each call that ended uncongested with the limit in
 *   use raises it by ½ (×1.5 per round trip: an overshoot queues at most half the replica's
 *   capacity before the answers show it); after that by 1/limit (one per round trip). A queue
 *   reported at all ends slow start.
 * - Uncongested means the smoothed latency (EWMA over ~5 calls) is within 1.5× the replica's
 *   uncongested latency (the lowest smoothed latency of the last one to two minutes), and the
 *   replica's last load report (vLLM's `num_requests_waiting`) shows fewer waiting than the
 *   allowance — a short queue keeps the replica's next batch ready, a long one is only delay.
 * - Back off: ×0.75 on a busy answer (503 queue full, 429) or a timeout; ×0.9 when the smoothed
 *   latency passes 2× the uncongested one; on a report of more waiting than the allowance, by the
 *   excess (what a single gateway put there), at least ×0.9 and at most ×0.5. At most one cut per
 *   round trip, so the answers of calls sent before a cut do not cut again.
 */

export interface AdaptiveLimitOptions {
  /** The provider's max_concurrency: the limit never goes above it. */
  max: number
  /** Where it starts; default min(max, 4). */
  initial?: number
  /** How long a load report counts, in ms; default 3,000 (a few /metrics polls). */
  reportTtlMs?: number
}

export interface AdaptiveLimit {
  /** Calls the replica should have in flight now: a whole number in [1, max]. */
  readonly limit: number
  /** A call answered. `inFlight`: the replica's calls when it ended, this one included. */
  answered(latencyMs: number, inFlight: number, now: number): void
  /** A call answered busy (503 with a full queue, 429) or timed out. */
  congested(now: number): void
  /** A load report from the replica: requests waiting in its queue. */
  reported(waiting: number, now: number): void
}

const SLOW_START_STEP = 0.5
const EWMA_WEIGHT = 0.2
const HOLDS = 1.5 // smoothed latency within this × uncongested: room to probe up
const RISEN = 2 // above this ×: back off
const BUSY_CUT = 0.75
const SOFT_CUT = 0.9
const BASELINE_WINDOW_MS = 60_000
const MIN_COOLDOWN_MS = 50
const MAX_COOLDOWN_MS = 5_000

/** Requests waiting that still count as a short queue: 2, or 1/16 of the limit on big replicas. */
export function queueAllowance(limit: number): number {
  return Math.max(2, Math.ceil(limit / 16))
}

export function createAdaptiveLimit(options: AdaptiveLimitOptions): AdaptiveLimit {
  const max = Math.max(1, options.max)
  const reportTtlMs = options.reportTtlMs ?? 3_000
  let value = Math.min(max, Math.max(1, options.initial ?? 4))
  let slowStart = true
  let smoothed: number | null = null
  // The lowest smoothed latency in this window and the one before it: the uncongested latency
  // follows the replica (a bigger model, longer prompts) within two windows.
  let windowStart = -Infinity
  let windowLow = Infinity
  let previousLow = Infinity
  let lastCut = -Infinity
  let waiting = 0
  let reportedAt = -Infinity

  // The epsilon: fifteen steps of 1/15 make 15.999…, which is 16.
  const limit = () => Math.min(max, Math.max(1, Math.floor(value + 1e-9)))
  const baseline = () => Math.min(windowLow, previousLow)
  const cooldown = () => {
    const low = baseline()
    return Number.isFinite(low) ? Math.min(MAX_COOLDOWN_MS, Math.max(MIN_COOLDOWN_MS, low)) : 100
  }
  const queued = (now: number) => (now - reportedAt <= reportTtlMs ? waiting : 0)

  /** Multiplies the limit by `factor`, once per round trip; ends slow start. */
  function cut(factor: number, now: number): void {
    if (now - lastCut < cooldown()) return
    lastCut = now
    slowStart = false
    value = Math.max(1, Math.min(value, limit()) * factor)
  }

  function observeLatency(latencyMs: number, now: number): number {
    smoothed = smoothed === null ? latencyMs : smoothed + EWMA_WEIGHT * (latencyMs - smoothed)
    if (now - windowStart >= BASELINE_WINDOW_MS) {
      previousLow = windowLow
      windowLow = Infinity
      windowStart = now
    }
    windowLow = Math.min(windowLow, smoothed)
    return smoothed
  }

  return {
    get limit() {
      return limit()
    },
    answered(latencyMs, inFlight, now) {
      const latency = observeLatency(latencyMs, now)
      const low = baseline()
      if (latency > low * RISEN) return cut(SOFT_CUT, now)
      const used = inFlight >= limit()
      const short = queued(now) < queueAllowance(limit())
      if (!used || !short || latency > low * HOLDS || value >= max) return
      value = Math.min(max, value + (slowStart ? SLOW_START_STEP : 1 / limit()))
    },
    congested(now) {
      cut(BUSY_CUT, now)
    },
    reported(count, now) {
      waiting = Math.max(0, count)
      reportedAt = now
      if (waiting > 0) slowStart = false
      const excess = waiting - queueAllowance(limit())
      if (excess <= 0) return
      const current = limit()
      const factor = Math.min(SOFT_CUT, Math.max(0.5, (current - excess) / current))
      cut(factor, now)
    },
  }
}
