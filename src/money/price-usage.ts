/** What a result costs: its reported usage at the offering's list price, exact. */
import type { Offering } from '../../providers/catalog.ts'
import type { Usage } from '../../providers/types.ts'
import { priceOf } from './ceiling.ts'

export function priceUsage(usage: Usage, offering: Offering): string {
  return priceOf(
    { input: usage.input_tokens, output: usage.output_tokens },
    { input: offering.input_usd_per_mtok, output: offering.output_usd_per_mtok },
  ).toFixed()
}
