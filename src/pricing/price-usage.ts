/**
 * What a result costs: its reported usage at the offering's list price, exact.
 *
 * Runs once per line at thousands of lines a second, so it works in integers: a price such as
 * "0.40" (USD per million tokens) is 40 × 10⁻², parsed once per offering; the cost is
 * (input × input price + output × output price) / 10⁶, a BigInt sum printed with its decimal
 * point put back. The same canonical text as decimal.js's toFixed(), about ten times faster;
 * a property test holds it to priceOf() in ceiling.ts.
 */
import type { Offering } from '../catalog/catalog-file.ts'
import type { Usage } from '../../providers/types.ts'

/** A price as an integer and a power of ten: "0.40" is { units: 40n, scale: 2 }. */
interface ScaledPrice {
  units: bigint
  scale: number
}

/** Both prices of an offering as integers on one scale, worked out once per offering. */
interface OfferingPrices {
  input: bigint
  output: bigint
  scale: number
}

const parsed = new WeakMap<Offering, OfferingPrices>()

/** A plain decimal string ("12", "0.05"), as the catalog schema requires. */
function scaled(price: string): ScaledPrice {
  const point = price.indexOf('.')
  if (point < 0) return { units: BigInt(price), scale: 0 }
  return {
    units: BigInt(price.slice(0, point) + price.slice(point + 1)),
    scale: price.length - point - 1,
  }
}

function pricesOf(offering: Offering): OfferingPrices {
  let prices = parsed.get(offering)
  if (!prices) {
    const input = scaled(offering.input_usd_per_mtok)
    const output = scaled(offering.output_usd_per_mtok)
    const scale = Math.max(input.scale, output.scale)
    const onScale = (price: ScaledPrice) => price.units * 10n ** BigInt(scale - price.scale)
    prices = { input: onScale(input), output: onScale(output), scale }
    parsed.set(offering, prices)
  }
  return prices
}

export function priceUsage(usage: Usage, offering: Offering): string {
  const { input, output, scale } = pricesOf(offering)
  const sum = BigInt(usage.input_tokens) * input + BigInt(usage.output_tokens) * output
  // Dollars = sum / 10^(scale + 6): per million tokens.
  return decimalText(sum, scale + 6)
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
