/** All money is decimal.js; stored and sent as canonical decimal strings ("0.000120"). */
import Decimal from 'decimal.js'

// 40 significant digits: per-token prices are 1e-8-sized and batches sum 50,000 of them.
export const Money = Decimal.clone({ precision: 40, rounding: Decimal.ROUND_HALF_EVEN })
export type Money = Decimal

export const ZERO = new Money(0)

/** Canonical text form: plain notation, no exponent, no trailing zeros. */
export const moneyText = (value: Decimal.Value) => new Money(value).toFixed()

/** Rendered for people and APIs: six decimals (micro-dollars), never rounded down. */
export const usd = (value: Decimal.Value) => new Money(value).toFixed(6, Decimal.ROUND_UP)

export const minMoney = (a: Decimal, b: Decimal) => (a.lessThan(b) ? a : b)
