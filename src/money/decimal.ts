/** All money is decimal.js; stored and sent as canonical decimal strings ("0.000120"). */
import Decimal from 'decimal.js'

// 40 significant digits: per-token prices are 1e-8-sized and batches sum 50,000 of them.
export const Money = Decimal.clone({ precision: 40, rounding: Decimal.ROUND_HALF_EVEN })
export type Money = Decimal

export const ZERO = new Money(0)

/** Canonical text form: plain notation, no exponent, no trailing zeros. */
export const moneyText = (value: Decimal.Value) => new Money(value).toFixed()

/**
 * Rendered for people and APIs: at least six decimals (micro-dollars), and every further digit
 * the exact amount has, so what is shown always adds up to what was charged.
 */
export const usd = (value: Decimal.Value) => {
  const money = new Money(value)
  return money.decimalPlaces() <= 6 ? money.toFixed(6) : money.toFixed()
}

/** What an account may still spend: its balance less what open batches hold, never below zero. */
export const availableUsd = (account: { balanceUsd: string; heldUsd: string }) =>
  Money.max(0, new Money(account.balanceUsd).minus(account.heldUsd))

export const minMoney = (a: Decimal, b: Decimal) => (a.lessThan(b) ? a : b)

/** What admitting a batch holds (docs/money-and-limits.md): its ceiling, or its spend cap when that is lower. */
export const batchHold = (ceilingUsd: string, maxCostUsd: string | null | undefined) =>
  maxCostUsd === null || maxCostUsd === undefined
    ? moneyText(ceilingUsd)
    : moneyText(minMoney(new Money(ceilingUsd), new Money(maxCostUsd)))
