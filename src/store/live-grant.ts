/** The one rule both stores apply when an instance asks for more live credit (LiveCreditStore). */
import { Money } from '../money/decimal.ts'

/** Charge groups remembered for idempotency: a retried write comes seconds later, never a day. */
export const GROUP_MEMORY_MS = 86_400_000

/**
 * Nothing when `need` does not fit; else at least `need`, at most `want`, and beyond `need` at
 * most half of what is available (`need` and `want` have at most 18 decimals), so one instance's block never takes all of a small balance
 * from the other instances of a fleet.
 */
export function liveGrant(available: Money, need: Money, want: Money): Money {
  if (available.lessThan(need) || need.lessThanOrEqualTo(0)) return new Money(0)
  // At most 18 decimals, as the ledger counts (src/money/fixed-point.ts): what it hands back
  // then empties the lease exactly, leaving no dust behind.
  return Money.max(need, Money.min(want, available.div(2).toDecimalPlaces(18, Money.ROUND_DOWN)))
}
