/**
 * What an operator may add to or take from an account at once (admin API and CLI): a decimal
 * string of at most 10^12 USD either way with at most 6 decimals (micro-dollars, the unit the
 * gateway shows). The bound keeps every balance far inside decimal.js's 40 significant digits
 * (src/money/decimal.ts), so credits and charges on it stay exact: a 401-digit credit used to be
 * rounded to 40 digits and then lost a −100 debit entirely.
 */
import { Money, usd } from './decimal.ts'

export const MAX_CREDIT_USD = '1000000000000'
const SHAPE = /^-?\d+(\.\d+)?$/
const BOUNDED = /^-?\d{1,13}(\.\d{1,6})?$/

export const CREDIT_RULE = `a decimal string of at most ${MAX_CREDIT_USD} (10^12) USD either way with at most 6 decimals, such as "100" or "-12.50"`
/** The same for an amount that cannot be negative (a new account's credit, a daily limit). */
const UNSIGNED_RULE = `a decimal string of at most ${MAX_CREDIT_USD} (10^12) USD, not negative, with at most 6 decimals, such as "100" or "12.50"`

/**
 * null when `text` is a valid credit amount; otherwise what is wrong with it. `signed`: whether it
 * may be negative (a credit taken away); unsigned, the rule told is the unsigned one.
 */
export function creditAmountProblem(text: string, signed = true): string | null {
  const rule = signed ? CREDIT_RULE : UNSIGNED_RULE
  if (!SHAPE.test(text)) return `must be ${rule}`
  if (!signed && text.startsWith('-')) return `must not be negative: ${rule}`
  if (!BOUNDED.test(text) || new Money(text).abs().greaterThan(MAX_CREDIT_USD)) {
    return `must be ${rule} (got ${text.length > 24 ? `${text.slice(0, 20)}… (${text.length} characters)` : text})`
  }
  return null
}

/**
 * null when adding `amountUsd` leaves `balanceUsd` at zero or above; otherwise why not, with the
 * most that can be removed. (A settlement or another removal between the check and the write may
 * still leave less: the store then stops at zero, as it always does.)
 */
export function creditRemovalProblem(balanceUsd: string, amountUsd: string): string | null {
  const balance = new Money(balanceUsd)
  if (!balance.plus(amountUsd).isNegative()) return null
  // The most an amount (at most 6 decimals) can take: the balance rounded down, never up.
  const most = balance.toFixed(6, Money.ROUND_DOWN)
  return `would take the balance below zero: it is ${usd(balance)} USD; remove at most ${most} ("-${most}")`
}
