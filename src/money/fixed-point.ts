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

const MILLION = 1_000_000n

/** An offering's prices per million tokens, as units; parsed once per catalog offering. */
const offeringUnits = new WeakMap<object, { input: bigint; output: bigint }>()

function unitsOf(offering: { input_usd_per_mtok: string; output_usd_per_mtok: string }) {
  let prices = offeringUnits.get(offering)
  if (!prices) {
    prices = {
      input: toUnits(offering.input_usd_per_mtok, 'up'),
      output: toUnits(offering.output_usd_per_mtok, 'up'),
    }
    offeringUnits.set(offering, prices)
  }
  return prices
}

/**
 * priceOf(tokens, highestPrices(offerings)) of ceiling.ts in units, rounded up: the same
 * pessimistic arithmetic, at a tenth of the cost, for a check made on every live call.
 */
export function ceilingUnits(
  tokens: { input: number; output: number },
  offerings: readonly { input_usd_per_mtok: string; output_usd_per_mtok: string }[],
): bigint {
  let input = 0n
  let output = 0n
  for (const offering of offerings) {
    const prices = unitsOf(offering)
    if (prices.input > input) input = prices.input
    if (prices.output > output) output = prices.output
  }
  const perMillion = BigInt(tokens.input) * input + BigInt(tokens.output) * output
  return (perMillion + MILLION - 1n) / MILLION
}

/** What a reported usage costs at one offering's price, in units (priceUsage of price-usage.ts). */
export function usageUnits(
  usage: { input_tokens: number; output_tokens: number },
  offering: { input_usd_per_mtok: string; output_usd_per_mtok: string },
): bigint {
  const prices = unitsOf(offering)
  const perMillion =
    BigInt(usage.input_tokens) * prices.input + BigInt(usage.output_tokens) * prices.output
  return (perMillion + MILLION - 1n) / MILLION
}
