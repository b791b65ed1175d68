/**
 * Money as integers of 10⁻¹⁸ USD, for the live path's per-call arithmetic: a BigInt add or
 * compare costs tens of nanoseconds where a decimal.js one costs a microsecond, and list prices
 * (at most 12 decimals per token once divided by a million) stay exact at this scale. Anything
 * finer is rounded the safe way for its use: holds up, grants down.
 */
const PLACES = 18
const ONE = 10n ** BigInt(PLACES)

/** A plain decimal string ("0.000120", "12") as units; `round` says which way past 18 places. */
export function toUnits(text: string, round: 'up' | 'down'): bigint {
  const point = text.indexOf('.')
  if (point < 0) return BigInt(text) * ONE
  const whole = text.slice(0, point) || '0'
  let fraction = text.slice(point + 1)
  let extra = false
  if (fraction.length > PLACES) {
    extra = /[1-9]/.test(fraction.slice(PLACES))
    fraction = fraction.slice(0, PLACES)
  }
  const units = BigInt(whole) * ONE + BigInt(fraction.padEnd(PLACES, '0'))
  return extra && round === 'up' ? units + 1n : units
}

/** Units as a canonical decimal string: plain notation, no trailing zeros ("0.00012", "0"). */
export function unitsText(units: bigint): string {
  const negative = units < 0n
  const digits = (negative ? -units : units).toString().padStart(PLACES + 1, '0')
  const whole = digits.slice(0, digits.length - PLACES)
  const fraction = digits.slice(digits.length - PLACES).replace(/0+$/, '')
  return `${negative ? '-' : ''}${whole}${fraction ? `.${fraction}` : ''}`
}
