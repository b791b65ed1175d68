/**
 * The rates a line's ceiling is priced at (docs/money-and-limits.md, docs/pricing.md): for its prompt bound, the highest
 * rate any of its prompt tokens can be billed at on any offering it may go to — input, cache
 * read, cache write (where above the input rate), the 1-hour write only when the line asks for
 * a 1-hour TTL, and each of these at the long-context tier where the bound can pass its
 * threshold; for its output bound, the highest output rate of those tiers. Worked out once per
 * routing and tier choice, in decimals and in fixed-point units.
 */
import type Decimal from 'decimal.js'
import type { Offering } from '../catalog/catalog-file.ts'
import { Money } from '../money/decimal.ts'
import { toUnits } from '../money/fixed-point.ts'
import { offeringRates, type TierRates } from './rates.ts'

export interface CeilingRates {
  input: Decimal
  output: Decimal
  /** The same, as 10⁻¹⁸ USD units per million tokens, rounded up (money/fixed-point.ts). */
  inputUnits: bigint
  outputUnits: bigint
}

/** What of a line changes the rates its ceiling takes, besides its offerings. */
export interface CeilingFacts {
  /** The line's prompt bound, in tokens: whether a long-context tier can apply. */
  promptBound: number
  /** Whether it asks a cache TTL of one hour (Anthropic's 1-hour writes). */
  ttl1h: boolean
}

const NO_FACTS: CeilingFacts = { promptBound: 0, ttl1h: false }

const memo = new WeakMap<readonly Offering[], Map<string, CeilingRates>>()

function promptRate(tier: TierRates, ttl1h: boolean): Decimal {
  let rate = Money.max(tier.input, tier.cached, tier.write)
  if (ttl1h) rate = Money.max(rate, tier.write1h)
  return rate
}

function compute(offerings: readonly Offering[], facts: CeilingFacts): CeilingRates {
  let input = new Money(0)
  let output = new Money(0)
  for (const offering of offerings) {
    const { base, long } = offeringRates(offering)
    const tiers = long && facts.promptBound > long.above ? [base, long] : [base]
    for (const tier of tiers) {
      input = Money.max(input, promptRate(tier, facts.ttl1h))
      output = Money.max(output, tier.output)
    }
  }
  return {
    input,
    output,
    inputUnits: toUnits(input.toFixed(), 'up'),
    outputUnits: toUnits(output.toFixed(), 'up'),
  }
}

/** Which long-context tiers the bound passes, and the TTL: the memo's key. */
function factsKey(offerings: readonly Offering[], facts: CeilingFacts): string {
  let key = facts.ttl1h ? '1' : '0'
  for (const offering of offerings) {
    const above = offering.long_context?.above_input_tokens
    if (above !== undefined) key += facts.promptBound > above ? '1' : '0'
  }
  return key
}

/** The highest rates among `offerings` for a line with these facts (none: the base tier's). */
export function ceilingRates(
  offerings: readonly Offering[],
  facts: CeilingFacts = NO_FACTS,
): CeilingRates {
  let byKey = memo.get(offerings)
  if (!byKey) memo.set(offerings, (byKey = new Map()))
  const key = factsKey(offerings, facts)
  let rates = byKey.get(key)
  if (!rates) byKey.set(key, (rates = compute(offerings, facts)))
  return rates
}

const MILLION = 1_000_000n

/** A token bound's price at ceiling rates, in units, rounded up: the live path's check. */
export function ceilingUnits(tokens: { input: number; output: number }, rates: CeilingRates) {
  const perMillion =
    BigInt(tokens.input) * rates.inputUnits + BigInt(tokens.output) * rates.outputUnits
  return (perMillion + MILLION - 1n) / MILLION
}

/** Whether a chat body asks for a 1-hour cache anywhere: on a content part or a tool (docs/pricing.md). */
export function asksOneHourCache(body: Record<string, unknown>): boolean {
  const oneHour = (item: unknown) =>
    (item as { cache_control?: { ttl?: unknown } } | null)?.cache_control?.ttl === '1h'
  const messages = body.messages
  if (Array.isArray(messages)) {
    for (const message of messages) {
      const content = (message as { content?: unknown } | null)?.content
      if (Array.isArray(content) && content.some(oneHour)) return true
    }
  }
  return Array.isArray(body.tools) && body.tools.some(oneHour)
}
