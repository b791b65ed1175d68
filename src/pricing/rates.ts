/**
 * An offering's rate for each token class, at each tier (docs/pricing.md): the catalog's rates with
 * every absent class rate filled in with its tier's input rate. Worked out once per offering.
 */
import type { Offering } from '../catalog/catalog-file.ts'

/** USD per million tokens of each class, as plain decimal strings. */
export interface TierRates {
  input: string
  cached: string
  write: string
  write1h: string
  output: string
}

export interface OfferingRates {
  base: TierRates
  /** The long-context tier and the prompt size above which it applies, when the offering has one. */
  long: (TierRates & { above: number }) | null
}

type RateSource = Pick<
  Offering,
  | 'input_usd_per_mtok'
  | 'output_usd_per_mtok'
  | 'cached_input_usd_per_mtok'
  | 'cache_write_usd_per_mtok'
  | 'cache_write_1h_usd_per_mtok'
>

function tierOf(source: RateSource): TierRates {
  const input = source.input_usd_per_mtok
  return {
    input,
    cached: source.cached_input_usd_per_mtok ?? input,
    write: source.cache_write_usd_per_mtok ?? input,
    write1h: source.cache_write_1h_usd_per_mtok ?? input,
    output: source.output_usd_per_mtok,
  }
}

const resolved = new WeakMap<object, OfferingRates>()

export function offeringRates(offering: Offering): OfferingRates {
  let rates = resolved.get(offering)
  if (!rates) {
    const long = offering.long_context
    rates = {
      base: tierOf(offering),
      long: long ? { ...tierOf(long), above: long.above_input_tokens } : null,
    }
    resolved.set(offering, rates)
  }
  return rates
}

/** The tier a request of `promptTokens` (all classes together) is priced at. */
export function tierFor(offering: Offering, promptTokens: number): TierRates {
  const { base, long } = offeringRates(offering)
  return long && promptTokens > long.above ? long : base
}
