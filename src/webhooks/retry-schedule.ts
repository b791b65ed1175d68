/**
 * When a failed delivery is tried again (docs/events-and-webhooks.md: growing backoff for 24 hours). The delay
 * doubles from `baseMs` (MULTIGRID_WEBHOOK_RETRY_BASE_MS, 5 s by default) up to an hour, with
 * ±10% jitter so a receiver that comes back is not hit by every delivery at once: 5 s, 10 s,
 * 20 s, … 1 h, 1 h, … — about 33 attempts in the 24 hours. An attempt that would fall past
 * 24 hours after the event is not made: the delivery ends `failed` — but for one last attempt
 * when a failure would disable the webhook (below).
 */

export const RETRY_WINDOW_MS = 24 * 3600 * 1000
export const MAX_RETRY_DELAY_MS = 3600 * 1000

/** The time (Unix ms) of the attempt after the `attempts`-th failed one, or null: give up. */
export function nextAttemptAt(options: {
  attempts: number
  /** The event's time, Unix ms. */
  createdAtMs: number
  nowMs: number
  baseMs: number
  /**
   * When a failure would disable the webhook (Unix ms): its first failure since its last
   * delivery plus MULTIGRID_WEBHOOK_DISABLE_AFTER_MS. Null: not known.
   */
  disableAtMs?: number | null
  random?: () => number
}): number | null {
  const random = options.random ?? Math.random
  const delay = Math.min(
    MAX_RETRY_DELAY_MS,
    options.baseMs * 2 ** Math.max(0, options.attempts - 1),
  )
  const at = Math.round(options.nowMs + delay * (0.9 + 0.2 * random()))
  const windowEnd = options.createdAtMs + RETRY_WINDOW_MS
  if (at <= windowEnd) return at
  // The disable rule (docs/webhooks-and-streams.md) is checked as an attempt fails. A webhook
  // failing only this event started failing at its first attempt, and the schedule's last one
  // lands 23.4–23.8 h after the event: short of 24 h, so nothing would ever disable it. One last
  // attempt at the moment a failure disables it closes that gap, when it comes at most an
  // ordinary retry's delay (1 h) past the window; a longer threshold needs more events.
  const disableAt = options.disableAtMs
  if (disableAt != null && disableAt > options.nowMs && disableAt <= windowEnd + MAX_RETRY_DELAY_MS)
    return disableAt
  return null
}
