/**
 * The SPEC's arithmetic for a line's cost (docs/pricing.md), worked out here with decimal.js
 * apart from the gateway's own: the pricing tests compare what the gateway charged with it.
 */
import Decimal from 'decimal.js'

/** An offering's rates per million tokens, each class and tier (the catalog's names). */
export type Rates = {
  input_usd_per_mtok: string
  output_usd_per_mtok: string
  cached_input_usd_per_mtok?: string
  cache_write_usd_per_mtok?: string
  cache_write_1h_usd_per_mtok?: string
  long_context: Omit<Rates, 'long_context'> & { above_input_tokens: number }
}

/** Tokens by class, as the SPEC counts them: `prompt` counts every prompt token. */
export interface Classes {
  prompt: number
  cached: number
  write5m: number
  write1h: number
  output: number
}

/** Σ tokens × rate of its class, the whole request at the long-context tier above N. */
export function specCost(rates: Rates, t: Classes): string {
  const tier = t.prompt > rates.long_context.above_input_tokens ? rates.long_context : rates
  const input = new Decimal(tier.input_usd_per_mtok)
  const rate = (value: string | undefined) => new Decimal(value ?? input)
  const uncached = t.prompt - t.cached - t.write5m - t.write1h
  return input
    .times(uncached)
    .plus(rate(tier.cached_input_usd_per_mtok).times(t.cached))
    .plus(rate(tier.cache_write_usd_per_mtok).times(t.write5m))
    .plus(rate(tier.cache_write_1h_usd_per_mtok).times(t.write1h))
    .plus(new Decimal(tier.output_usd_per_mtok).times(t.output))
    .div(1_000_000)
    .toFixed()
}
