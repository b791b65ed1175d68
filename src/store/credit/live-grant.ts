/** The one rule both stores apply when an instance asks for more live credit (LiveCreditStore). */
import { Money, moneyText } from '../../money/decimal.ts'
import { dailyRoom } from './daily-spend.ts'
import type { DailyLimitRefusal } from './credit-store.ts'

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

/**
 * What a lease may take: the account's free credit, and no more than its daily limit leaves
 * (`used`: what the day has used, leases included). `dailyLimit` is set when the limit, not the
 * credit, bounds it (absent otherwise): a call refused then is refused 429 for the limit rather
 * than 402 for the credit, whichever top-up of a busy account saw it last.
 */
export function liveAvailable(
  credit: Money,
  limit: unknown,
  used: Money,
): { available: Money; dailyLimit?: DailyLimitRefusal } {
  const room = dailyRoom(limit, used)
  if (room === null || room.greaterThanOrEqualTo(credit)) return { available: credit }
  return {
    available: room,
    dailyLimit: { limitUsd: moneyText(String(limit)), usedUsd: moneyText(used) },
  }
}
