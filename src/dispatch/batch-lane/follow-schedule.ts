/**
 * When a provider batch is next looked at, and what is done then (docs/batch-lanes.md): polled every
 * `poll_s`, backing off on failed polls (a 5xx, a lost connection) up to 16 × poll_s, never past
 * the fallback time deadline − fallback_hours, when a provider batch not yet ended is cancelled
 * upstream and its unfinished lines go back to pending for the live lanes.
 */

/** At most this many times poll_s between two looks after failures. */
export const MAX_BACKOFF = 16

export interface FollowTimes {
  /** poll_s in ms. */
  pollMs: number
  /** deadline_at − fallback_hours, Unix ms. */
  fallbackAtMs: number
}

/** The next look after `failures` failed polls in a row (0: the last poll worked). */
export function nextPollAt(times: FollowTimes, failures: number, nowMs: number): number {
  const factor = Math.min(MAX_BACKOFF, 2 ** Math.max(0, failures))
  const next = nowMs + times.pollMs * factor
  // The fallback time is a look of its own: the cancel must not wait for a long backoff.
  return nowMs < times.fallbackAtMs ? Math.min(next, times.fallbackAtMs) : next
}

/** A provider batch's state as last read, in the spec's unified terms. */
export type ProviderState = 'running' | 'cancelling' | 'ended' | 'failed'

export type FollowAction =
  /** Not ended and still in time: look again later. */
  | 'wait'
  /** Past the fallback time, or its Multigrid batch cancelled: cancel it upstream. */
  | 'cancel'
  /** Ended (completed, expired or cancelled): read what it finished and map it back. */
  | 'read'
  /** Refused as a whole (OpenAI `failed`): every line back to pending, for the other lanes. */
  | 'return_all'

/** What to do with a chunk's provider batch at `nowMs`. */
export function followAction(
  state: ProviderState,
  options: { nowMs: number; fallbackAtMs: number; cancelRequested: boolean },
): FollowAction {
  if (state === 'ended') return 'read'
  if (state === 'failed') return 'return_all'
  // A cancel already asked for is waited out: the provider ends it and what it did is read.
  if (state === 'cancelling') return 'wait'
  if (options.cancelRequested || options.nowMs >= options.fallbackAtMs) return 'cancel'
  return 'wait'
}
