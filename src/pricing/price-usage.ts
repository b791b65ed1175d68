/**
 * What a result costs (docs/pricing.md): each token class of its reported usage at its rate, at the
 * tier its prompt size selects, exact. The one pricing function for batch lines and live calls,
 * whole or streamed.
 *
 * Runs once per line at thousands of lines a second, so it works in integers: a price such as
 * "0.40" (USD per million tokens) is 40 × 10⁻², parsed once per offering and tier; the cost is
 * Σ tokens × rate / 10⁶, a BigInt sum printed with its decimal point put back. The same
 * canonical text as decimal.js's toFixed(), about ten times faster; a property test holds it to
 * the decimal.js arithmetic.
 */
import type { Offering } from '../catalog/catalog-file.ts'
import type { Usage } from '../../providers/types.ts'
import { tierFor, type TierRates } from './rates.ts'

/** A price as an integer and a power of ten: "0.40" is { units: 40n, scale: 2 }. */
interface ScaledPrice {
  units: bigint
  scale: number
}

/** A tier's rates as integers on one scale, worked out once per tier. */
interface ScaledRates {
  input: bigint
  cached: bigint
  write: bigint
  write1h: bigint
  output: bigint
  scale: number
}

const parsed = new WeakMap<TierRates, ScaledRates>()

/** A plain decimal string ("12", "0.05"), as the catalog schema requires. */
function scaled(price: string): ScaledPrice {
  const point = price.indexOf('.')
  if (point < 0) return { units: BigInt(price), scale: 0 }
  return {
    units: BigInt(price.slice(0, point) + price.slice(point + 1)),
    scale: price.length - point - 1,
  }
}

function scaledRates(tier: TierRates): ScaledRates {
  let rates = parsed.get(tier)
  if (!rates) {
    const each = {
      input: scaled(tier.input),
      cached: scaled(tier.cached),
      write: scaled(tier.write),
      write1h: scaled(tier.write1h),
      output: scaled(tier.output),
    }
    const scale = Math.max(...Object.values(each).map((price) => price.scale))
    const onScale = (price: ScaledPrice) => price.units * 10n ** BigInt(scale - price.scale)
    rates = {
      input: onScale(each.input),
      cached: onScale(each.cached),
      write: onScale(each.write),
      write1h: onScale(each.write1h),
      output: onScale(each.output),
      scale,
    }
    parsed.set(tier, rates)
  }
  return rates
}

/** The tokens of each class in a usage: uncached input is what the cache classes leave. */
export function tokenClasses(usage: Usage) {
  const cached = usage.cached_input_tokens ?? 0
  const write = usage.cache_write_tokens ?? 0
  const write1h = usage.cache_write_1h_tokens ?? 0
  return {
    uncached: Math.max(0, usage.input_tokens - cached - write - write1h),
    cached,
    write,
    write1h,
    output: usage.output_tokens,
  }
}

/** Σ tokens × rate of each class at the usage's tier, and the scale of that sum. */
function classSum(usage: Usage, offering: Offering): { sum: bigint; scale: number } {
  const rates = scaledRates(tierFor(offering, usage.input_tokens))
  const tokens = tokenClasses(usage)
  const sum =
    BigInt(tokens.uncached) * rates.input +
    BigInt(tokens.cached) * rates.cached +
    BigInt(tokens.write) * rates.write +
    BigInt(tokens.write1h) * rates.write1h +
    BigInt(tokens.output) * rates.output
  return { sum, scale: rates.scale }
}

export function priceUsage(usage: Usage, offering: Offering): string {
  const { sum, scale } = classSum(usage, offering)
  // Dollars = sum / 10^(scale + 6): per million tokens.
  return decimalText(sum, scale + 6)
}

/** The live ledger's unit (money/fixed-point.ts): 10⁻¹⁸ USD. */
const UNIT_PLACES = 18

/**
 * priceUsage as 10⁻¹⁸ USD units for the live ledger, without the text in between: exact for any
 * price of at most 12 decimals, rounded up past 18 places (a hold never falls short).
 */
export function priceUsageUnits(usage: Usage, offering: Offering): bigint {
  const { sum, scale } = classSum(usage, offering)
  const shift = UNIT_PLACES - scale - 6
  if (shift >= 0) return sum * 10n ** BigInt(shift)
  const divisor = 10n ** BigInt(-shift)
  return (sum + divisor - 1n) / divisor
}

/** `value` / 10^`places` in plain notation without trailing zeros ("0.0000281", "12", "0"). */
function decimalText(value: bigint, places: number): string {
  if (value === 0n) return '0'
  let digits = value.toString()
  let end = digits.length
  while (places > 0 && digits.charCodeAt(end - 1) === 48 /* 0 */) {
    end--
    places--
  }
  digits = digits.slice(0, end)
  if (places === 0) return digits
  if (digits.length <= places) return `0.${'0'.repeat(places - digits.length)}${digits}`
  return `${digits.slice(0, digits.length - places)}.${digits.slice(digits.length - places)}`
}
