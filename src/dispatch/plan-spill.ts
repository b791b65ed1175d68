/**
 * The spill decision of docs/routing.md, for one batch line about to be sent: which of the offerings it
 * allows (in preference order: its `provider.order`, else cheapest first) takes it. A pure
 * function of what was measured, with the clock passed in: the dispatcher calls it for every line
 * of a batch with a choice, and bench/plan.ts runs the same function in simulated time.
 *
 * The rule, offering by offering, cheapest first:
 * - an unavailable offering (every replica failing, or paused on a 429) has no capacity: skip it;
 * - one with room takes the line (the cheapest capacity is kept full);
 * - a full one still takes it (the line waits its turn there) if it can finish the batch's lines
 *   not yet sent anywhere that the cheaper full ones before it will not, plus those already
 *   waiting or running there, by the target (deadline minus the safety margin) at the rate this
 *   batch gets there; or if it is the last one left;
 * - otherwise the line goes on to the next offering: it spills, and the next is weighed against
 *   what this one leaves (a cheap pool second takes a free pool's excess before a paid provider).
 * So a batch spills from the moment its measured rate shows the cheaper offerings cannot finish
 * it in time, and only until what is left fits them again: the excess, as early as it is known.
 * A line goes to one offering at a time; before the first answers the rate is unknown and a full
 * offering is waited for, not spilled from.
 */

/** One offering as the planner sees it at the moment of a decision. */
export interface OfferingView {
  /** Whether it can be sent to at all: false while every replica fails or it is paused on a 429. */
  available: boolean
  /**
   * It takes more lines at once: fewer lines (of every batch) sent there and not finished than
   * its concurrency and one more round waiting (spill-planner.ts says why).
   */
  hasRoom: boolean
  /** This batch's lines sent there and not finished (in service or waiting for a slot). */
  queued: number
  /** Its concurrency (max_concurrency): lines it serves at once. */
  slots: number
  /** Completions per second this batch gets there (throughput-meter.ts); null before measured. */
  perSecond: number | null
}

export interface SpillInput {
  nowMs: number
  /** deadline_at minus the safety margin, Unix ms. */
  targetMs: number
  /** The batch's lines not yet sent to any offering, this one included. */
  unsent: number
  /** In preference order. */
  offerings: readonly OfferingView[]
}

export type SpillChoice =
  | { kind: 'send'; index: number }
  /** Nothing can take it now: hand it back unsent (it uses none of its attempts). */
  | { kind: 'hold' }

/**
 * A spill is for good while a wrong wait can still be spilled later: a line spills only when the
 * shortfall passes the measured rate's own noise, 2% of what the offering can still do plus one
 * round of its slots (taken from the safety margin: at worst the batch ends that much later).
 * Measured: spilling on every dip sent 1–2% of a batch's lines to the paid offering for nothing
 * (bench/plan.ts, service times ±5%), and near the end of a short window, where the time left
 * is worth a few lines, it spilled a line every few hundred ms (test/planner/spill.test.ts).
 */
export const RATE_TOLERANCE = 0.02

export function chooseOffering({ nowMs, targetMs, unsent, offerings }: SpillInput): SpillChoice {
  let last = -1
  for (let i = offerings.length - 1; i >= 0; i--)
    if (offerings[i].available) {
      last = i
      break
    }
  if (last === -1) return { kind: 'hold' }
  const secondsLeft = Math.max(0, targetMs - nowMs) / 1000
  // The unsent lines the offerings weighed so far leave over: each full one still finishes what
  // it can by the target, so the next one is weighed against the rest, not the whole batch.
  let left = unsent
  for (let i = 0; i < last; i++) {
    const offering = offerings[i]
    if (!offering.available) continue
    if (offering.hasRoom) return { kind: 'send', index: i }
    if (offering.perSecond === null) return { kind: 'send', index: i }
    const canDo = offering.perSecond * secondsLeft * (1 + RATE_TOLERANCE) + offering.slots
    if (left + offering.queued <= canDo) return { kind: 'send', index: i }
    left -= Math.max(0, canDo - offering.queued)
  }
  return { kind: 'send', index: last }
}

/**
 * The projected finish (Unix ms) of a batch with `remaining` lines not yet done, at the rates it
 * gets on its offerings together; null before any rate is measured or when none is above zero.
 */
export function projectFinish(
  nowMs: number,
  remaining: number,
  perSecond: readonly (number | null)[],
): number | null {
  if (remaining === 0) return nowMs
  let total = 0
  for (const rate of perSecond) if (rate !== null) total += rate
  if (total <= 0) return null
  return nowMs + (remaining / total) * 1000
}
