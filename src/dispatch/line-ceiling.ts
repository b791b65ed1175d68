/**
 * A line's ceiling at settlement (docs/money-and-limits.md): the bounds admission priced it by,
 * and what an answer whose usage passes them is billed. One rule for the lines run here
 * (run-line.ts) and those a provider's batch API answered (batch-lane/map-chunk-results.ts).
 */
import type { Usage } from '../../providers/types.ts'
import type { ModelEntry, Offering } from '../catalog/catalog-file.ts'
import { endpointOf, upstreamTargets, type Catalog } from '../catalog/catalog.ts'
import { offeringsTaking } from '../catalog/speaks-api.ts'
import type { LineRecord } from '../domain.ts'
import { Money } from '../money/decimal.ts'
import {
  chatInputBound,
  chatOutputBound,
  embeddingsInputBound,
  highestPrices,
  priceOf,
  type UpstreamTarget,
} from '../pricing/ceiling.ts'
import { asksOneHourCache } from '../pricing/ceiling-rates.ts'
import { capPromptBound } from '../pricing/cap-bound.ts'
import { answerBytes, usageOnBound } from '../pricing/bill-on-bound.ts'
import type { ChatBody, EmbeddingsBody } from '../schemas/requests.ts'
import { lineRequest } from './line-request.ts'

/** What a line is billed, and its ceiling when the cost passed it (LineOutcome.ceilingUsd). */
export interface Billed {
  costUsd: string
  ceilingUsd?: string
}

/** The line's token bounds, as admission counted them for its ceiling (the same arithmetic). */
export function lineBounds(
  endpoint: 'chat' | 'embeddings',
  body: Record<string, unknown>,
  model: ModelEntry,
  targets: UpstreamTarget[],
) {
  if (endpoint === 'embeddings')
    return { input: embeddingsInputBound(body as EmbeddingsBody), output: 0 }
  const chat = body as ChatBody
  return {
    input: chatInputBound(chat, model, targets),
    output: chatOutputBound(chat, model),
  }
}

/**
 * An upstream that reported more than the line's ceiling allows: the outcome carries the
 * ceiling, so the line is billed its real cost, the overrun is logged and settlement takes the
 * excess from the account's free credit, not from what is held for other lines. Tokens within
 * both bounds cannot cost more than the ceiling (priced at the dearest offering), so the decimal
 * arithmetic runs only when a bound is passed: asked only then (passesBounds).
 */
export function overrun(
  costUsd: string,
  bounds: { input: number; output: number },
  offerings: readonly Offering[],
  body: Record<string, unknown>,
): { ceilingUsd?: string } {
  const facts = { promptBound: bounds.input, ttl1h: asksOneHourCache(body) }
  const ceiling = priceOf(bounds, highestPrices(offerings, facts))
  return ceiling.lessThan(costUsd) ? { ceilingUsd: ceiling.toFixed() } : {}
}

/** Whether the usage reported passes a bound of the line's ceiling (only then can it cost more). */
export function passesBounds(usage: Usage, bounds: { input: number; output: number }): boolean {
  return !(usage.input_tokens <= bounds.input && usage.output_tokens <= bounds.output)
}

/**
 * A capped batch's line was let in for its ceiling: it is never billed more, so the batch's cost
 * never passes max_cost_usd, whatever the upstream reports; null when it is within it.
 */
export function cappedAt(ceilingUsd: string | undefined, costUsd: string): Billed | null {
  return ceilingUsd !== undefined && new Money(ceilingUsd).lessThan(costUsd)
    ? { costUsd: ceilingUsd, ceilingUsd }
    : null
}

/**
 * What an answer whose check passed the budget is billed (structured_output_unchecked): as the
 * answer it is, never past its ceiling (`billed.ceilingUsd`, its capped batch's or its bounds').
 */
export function uncheckedCost(billed: Billed): string {
  const { costUsd, ceilingUsd } = billed
  return ceilingUsd !== undefined && new Money(ceilingUsd).lessThan(costUsd) ? ceilingUsd : costUsd
}

/**
 * What a line a provider's batch API answered is billed, by the rule of a line run here: within
 * its capped batch's ceiling; past its own ceiling, billed in full with the ceiling marked. The
 * offerings are the line's as it was routed: its model's batch routing, kept to those that take
 * it as it came when its chat body left fields out.
 */
export function laneLineBilled(
  catalog: LaneCatalog,
  line: Pick<LineRecord, 'input' | 'ceilingUsd'>,
  usage: Usage,
  costUsd: string,
): Billed {
  const capped = cappedAt(line.ceilingUsd, costUsd)
  if (capped) return capped
  // Within the ceiling its capped batch stored for it: within its bounds' price too.
  if (line.ceilingUsd !== undefined) return { costUsd }
  const routed = routedLine(catalog, line)
  if (!routed || !passesBounds(usage, routed.bounds)) return { costUsd }
  return { costUsd, ...overrun(costUsd, routed.bounds, routed.offerings, routed.body) }
}

/**
 * The usage a lane line's answer is billed on when the provider reported none, as a live
 * answer without usage is (bill-on-bound.ts): the prompt's bound and a token per byte of the
 * reply; null when the line cannot be read back.
 */
export function laneLineUsageOnBound(
  catalog: LaneCatalog,
  line: Pick<LineRecord, 'input'>,
  answer: Record<string, unknown>,
): Usage | null {
  const routed = routedLine(catalog, line)
  return routed && usageOnBound(routed.bounds, answerBytes(answer))
}

type LaneCatalog = Pick<Catalog, 'find' | 'routeBatch' | 'provider'>

/** A stored line as routing took it: its chat body, its offerings and its bounds. */
function routedLine(catalog: LaneCatalog, line: Pick<LineRecord, 'input'>) {
  const input = JSON.parse(line.input) as { url: string; body: Record<string, unknown> }
  const request = lineRequest(input)
  if ('problem' in request) return null
  const model = catalog.find(String(request.body.model))
  if (!model) return null
  const endpoint = endpointOf(input.url)
  const capBound = capPromptBound(catalog, endpoint, request.body, model)
  const routed = catalog.routeBatch(model, request.body.provider as never, capBound)
  const offerings = offeringsTaking(catalog, routed, request.native) ?? routed
  const bounds = lineBounds(endpoint, request.body, model, upstreamTargets(catalog, offerings))
  return { body: request.body, offerings, bounds }
}
