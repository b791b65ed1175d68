/**
 * Mapping a provider batch's results back to line outcomes (docs/batch-lanes.md): `succeeded` is billed
 * from the line's own usage at the batch lane's prices (docs/pricing.md), its answer judged against
 * its response_format as a live one is (judge-answer.ts: structured_output_invalid fails it
 * unbilled, structured_output_unchecked fails it billed); `errored` follows the retry
 * rules of a live failure (a 4xx invalid_request is final, a 5xx is retried with backoff while
 * attempts are left); `canceled` and `expired`, and any line the provider did not report, return
 * to pending without using an attempt, for the other lanes.
 */
import type { ChunkLineResult } from '../../../providers/batch-api/types.ts'
import type { Usage } from '../../../providers/types.ts'
import type { ModelEntry, Offering } from '../../catalog/catalog-file.ts'
import { offeringName } from '../../catalog/lanes.ts'
import { priceUsage } from '../../pricing/price-usage.ts'
import type { LineOutcome } from '../../store/store.ts'
import { lineAccounting, lineUsage } from '../billed-usage.ts'
import type { LineError } from '../../domain.ts'
import type { JudgeVerdict } from '../../schemas/schema-checks.ts'
import { judgedError } from '../judge-answer.ts'
import { uncheckedCost, type Billed } from '../line-ceiling.ts'
import { retryDelay, type RetryPolicy } from '../retry-policy.ts'
import { fromChat } from '../line-request.ts'
import { lineError } from '../run-line.ts'

/** A line of the chunk as the engine holds it: its position is its upstream id mg-<n>. */
export interface ChunkLineState {
  position: number
  batchId: string
  lineNo: number
  /** Attempts including the one this chunk counted. */
  attempts: number
}

export interface MapDeps {
  /**
   * The lines are in a provider's own API: each answer is kept in its shape, a Message Batch's as
   * a message (docs/clients/anthropic-sdk.md), a Responses line's as its Response.
   */
  asked?: 'messages' | 'responses' | null
  /**
   * Responses or Messages lines sent as their chat translation (a lane that does not speak their
   * API): each line's body as the caller wrote it, by line number, to build its answer from.
   */
  askedBodies?: ReadonlyMap<number, Record<string, unknown>>
  offering: Offering
  /** The catalog model whose batch offering this is, for the usage report. */
  model: ModelEntry
  retry: RetryPolicy
  nowMs: number
  /** How long the provider batch took, shown as each line's latency. */
  latencyMs: number
  /**
   * What a line's answer is billed by its own ceiling (line-ceiling.ts laneLineBilled): capped
   * within its batch's cap, or marked past its bounds. Unset: its price as it is.
   */
  billed?: (lineNo: number, usage: Usage, costUsd: string) => Billed
  /** The usage an answer without any is billed on (line-ceiling.ts laneLineUsageOnBound). */
  usageOnBound?: (lineNo: number, answer: Record<string, unknown>) => Usage | null
  /** The verdict on a line's answer against its response_format (judge-answer.ts); unset or null: none. */
  verdicts?: ReadonlyMap<number, JudgeVerdict | null>
  random?: () => number
}

/** One outcome for every line of the chunk, in position order. */
export function mapChunkResults(
  lines: readonly ChunkLineState[],
  results: readonly ChunkLineResult[],
  deps: MapDeps,
): LineOutcome[] {
  const byPosition = new Map(results.map((result) => [result.position, result]))
  const provider = offeringName(deps.offering)
  return lines.map((line): LineOutcome => {
    const { batchId, lineNo } = line
    const result = byPosition.get(line.position)
    if (!result || result.type === 'canceled' || result.type === 'expired')
      return { batchId, lineNo, kind: 'retry', notBefore: deps.nowMs, unsent: true }
    if (result.type === 'succeeded') {
      const answer = answerOf(result, deps, lineNo)
      const judged = judgedError(deps.verdicts?.get(lineNo) ?? null, answer)
      // Not the JSON the line asked for: failed and not billed, the answer kept, as live.
      if (judged?.code === 'structured_output_invalid')
        return failed(line, { error: judged, responseStatus: 200 }, deps)
      // No usage reported: billed on the line's bounds, as a live answer without usage is.
      const usage = result.usage ?? deps.usageOnBound?.(lineNo, result.body) ?? null
      if (usage === null)
        return { batchId, lineNo, kind: 'retry', notBefore: deps.nowMs, unsent: true }
      const costUsd = priceUsage(usage, deps.offering)
      const billed = deps.billed?.(lineNo, usage, costUsd) ?? { costUsd }
      const counted = {
        usage: lineUsage(usage, deps.offering, costUsd),
        accounting: lineAccounting(deps.model, usage, deps.offering, costUsd),
      }
      // Its check passed the budget: failed, billed as the answer it is, never past its ceiling.
      if (judged) {
        const error = { error: judged, responseStatus: 200 }
        return { ...failed(line, error, deps), costUsd: uncheckedCost(billed), ...counted }
      }
      return {
        batchId,
        lineNo,
        kind: 'succeeded',
        responseStatus: 200,
        response: JSON.stringify(answer),
        ...billed,
        provider,
        latencyMs: Math.round(deps.latencyMs),
        ...counted,
      }
    }
    if (result.type !== 'errored')
      return { batchId, lineNo, kind: 'retry', notBefore: deps.nowMs, unsent: true }
    const delay = retryDelay(deps.retry, result.error, line.attempts, deps.random)
    if (delay !== null) return { batchId, lineNo, kind: 'retry', notBefore: deps.nowMs + delay }
    const error = lineError(result.error, line.attempts)
    return failed(line, { error, responseStatus: result.error.status }, deps)
  })
}

/**
 * The line failed with `error`, not billed: counted in the usage report under its model, with no
 * tokens billed.
 */
function failed(
  line: ChunkLineState,
  { error, responseStatus }: { error: LineError; responseStatus: number | null },
  deps: Pick<MapDeps, 'offering' | 'model' | 'latencyMs'>,
): Extract<LineOutcome, { kind: 'failed' }> {
  return {
    batchId: line.batchId,
    lineNo: line.lineNo,
    kind: 'failed',
    error,
    responseStatus,
    costUsd: '0',
    provider: offeringName(deps.offering),
    latencyMs: Math.round(deps.latencyMs),
    accounting: {
      model: deps.model.id,
      inputTokens: 0,
      cachedInputTokens: 0,
      outputTokens: 0,
      firstOfferingCostUsd: '0',
    },
  }
}

/**
 * A line's answer as kept: a chat or embeddings body as it is; the provider's own answer as it
 * came when the line is in its API; a chat answer to a line in another API translated into that
 * API's shape (a Message Batch's into a message, a Responses line's into its Response).
 */
function answerOf(
  result: Extract<ChunkLineResult, { type: 'succeeded' }>,
  deps: Pick<MapDeps, 'asked' | 'askedBodies' | 'model'>,
  lineNo: number,
): Record<string, unknown> {
  if (!deps.asked) return result.body
  // Sent as chat: its chat answer (an Anthropic batch's message translated) becomes its Response
  // or message, of the request read back (or, were it not found, of its model alone).
  if (deps.askedBodies) {
    const asked = deps.askedBodies.get(lineNo) ?? { model: deps.model.id }
    return fromChat({ api: deps.asked, asked }, result.body)
  }
  if (result.native) return result.native
  // From a lane that speaks the Responses API the body is the Response already.
  if (deps.asked === 'responses') return result.body
  return fromChat({ api: 'messages', asked: { model: deps.model.id } }, result.body)
}
