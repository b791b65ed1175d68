/** The one rule both stores apply when an instance asks for more live credit (LiveCreditStore). */
import { Money } from '../money/decimal.ts'

/** Charge groups remembered for idempotency: a retried write comes seconds later, never a day. */
export const GROUP_MEMORY_MS = 86_400_000

/**
 * Nothing when `need` does not fit; else at least `need`, at most `want`, and beyond `need` at
 * most half of what is available, so one instance's block never takes all of a small balance
 * from the other instances of a fleet.
 */
export function liveGrant(available: Money, need: Money, want: Money): Money {
  if (available.lessThan(need) || need.lessThanOrEqualTo(0)) return new Money(0)
  return Money.max(need, Money.min(want, available.div(2)))
}
