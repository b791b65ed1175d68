/**
 * What a billed line adds besides its cost, the same from the live lanes (run-line.ts) and the
 * batch lanes (batch-lane/map-chunk-results.ts): its tokens by class, summed into its batch's
 * usage (docs/pricing.md), and what the usage report counts (docs/operations.md).
 */
import type { Usage } from '../../providers/types.ts'
import type { ModelEntry, Offering } from '../catalog/catalog-file.ts'
import { priceUsage } from '../pricing/price-usage.ts'
import type { LineAccounting, LineUsage } from '../store/store.ts'

/** The tokens a line was billed for, by class, for its batch's usage. */
export function lineUsage(usage: Usage, offering: Offering, costUsd: string): LineUsage {
  const cacheClasses =
    (usage.cached_input_tokens ?? 0) +
      (usage.cache_write_tokens ?? 0) +
      (usage.cache_write_1h_tokens ?? 0) >
    0
  const uncached = { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens }
  return {
    input: usage.input_tokens,
    cached: usage.cached_input_tokens ?? 0,
    written: (usage.cache_write_tokens ?? 0) + (usage.cache_write_1h_tokens ?? 0),
    output: usage.output_tokens,
    // Without cache classes the line's cost is its uncached cost: priced once.
    uncachedCostUsd: cacheClasses ? priceUsage(uncached, offering) : costUsd,
  }
}

/** The line as the usage report counts it: its catalog model and the usage it was billed. */
export function lineAccounting(
  model: ModelEntry,
  usage: Usage,
  offering: Offering,
  costUsd: string,
): LineAccounting {
  return {
    model: model.id,
    inputTokens: usage.input_tokens,
    cachedInputTokens: usage.cached_input_tokens ?? 0,
    outputTokens: usage.output_tokens,
    // The planner's saving (docs/routing.md) is measured against the first listed offering.
    firstOfferingCostUsd:
      model.offerings[0] === offering ? costUsd : priceUsage(usage, model.offerings[0]),
  }
}
