/**
 * Runs one claimed line: sends it to its offerings (send-with-fallback.ts: the next on a
 * retryable failure when the line allows it) and turns what happened into an outcome to record. Failures that belong to the line are returned as data, never thrown.
 */
import type { Outcome, Usage, UpstreamError } from '../../providers/types.ts'
import { isAdapterId, loraOfferings, type AdapterRecord } from '../catalog/adapters.ts'
import type { ModelEntry, Offering } from '../catalog/catalog-file.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { endpointOf, upstreamTargets } from '../catalog/catalog.ts'
import type { LineError } from '../domain.ts'
import {
  chatInputBound,
  chatOutputBound,
  embeddingsInputBound,
  highestPrices,
  priceOf,
  type UpstreamTarget,
} from '../money/ceiling.ts'
import { Money } from '../money/decimal.ts'
import { priceUsage } from '../money/price-usage.ts'
import type { ChatBody, EmbeddingsBody } from '../schemas/requests.ts'
import { structuredAnswerProblem } from '../schemas/structured-answer.ts'
import type { ClaimedLine, LineOutcome } from '../store/store.ts'
import { sendWithFallback } from '../upstream/send-with-fallback.ts'
import type { Upstreams } from '../upstream/upstreams.ts'
import { retryDelay, type RetryPolicy } from './retry-policy.ts'
import type { PlannedBatch, SpillPlanner } from './spill-planner.ts'

/** A line no allowed provider can take now is claimed again after this long (ms). */
export const HOLD_MS = 1_000

/** The planner's part in running a batch line (SPEC §13). */
export interface LinePlan {
  planner: SpillPlanner
  /** `send` with the planner told of each call (planned-send.ts). */
  upstreams: Pick<Upstreams, 'send'>
  batch: PlannedBatch
  /** The batch's lines not yet sent anywhere, this one included. */
  unsent: number
}

export interface RunLineDeps {
  catalog: Catalog
  upstreams: Upstreams
  retry: RetryPolicy
  signal?: AbortSignal
  /** False once the line's batch stopped dispatching (cancelled) or reached its deadline while the line waited. */
  proceed?: () => boolean
  /** The planner's choice of offering (batch lines); without it the line goes in catalog order. */
  plan?: LinePlan
  /** An adapter by its `ft:` id (the gateway's adapter directory); unset, no line names one. */
  adapters?: (id: string) => Promise<AdapterRecord | null>
}

export async function runLine(line: ClaimedLine, deps: RunLineDeps): Promise<LineOutcome> {
  const { batchId, lineNo } = line
  const parsed = JSON.parse(line.input) as { url: string; body: Record<string, unknown> }
  const endpoint = endpointOf(parsed.url)
  const named = String(parsed.body.model)
  // An adapter's line runs on its base's LoRA offerings, the adapter loaded where it goes.
  const found = isAdapterId(named) && deps.adapters ? await deps.adapters(named) : null
  const adapter = found?.accountId === line.accountId ? found : null
  const model = deps.catalog.find(adapter ? adapter.baseModel : named)
  const routing = parsed.body.provider as never
  const plan = deps.plan
  const routed = !model
    ? []
    : plan
      ? deps.catalog.routeBatch(model, routing)
      : deps.catalog.route(model, routing)
  const offerings = adapter ? loraOfferings(deps.catalog, routed) : routed
  if (!model || offerings.length === 0 || (isAdapterId(named) && !adapter)) {
    return fail(
      line,
      {
        code: 'invalid_request',
        message: `model ${String(parsed.body.model)} is no longer served by this gateway`,
      },
      null,
      null,
      null,
    )
  }
  // Past the deadline nothing new is sent: hand the line back, the batch's expiry ends it.
  const now = Date.now()
  if (now >= line.deadlineAt * 1000)
    return { batchId, lineNo, kind: 'retry', notBefore: now, unsent: true }

  // The planner picks where the line starts; on a failure it may still fall back to the dearer
  // offerings after that one, one at a time.
  let targets = offerings
  if (plan) {
    const choice = plan.planner.choose(plan.batch, providersOf(offerings), plan.unsent, now)
    if (choice.kind === 'hold')
      return { batchId, lineNo, kind: 'retry', notBefore: now + HOLD_MS, unsent: true }
    if (choice.index > 0) targets = offerings.slice(choice.index)
  }
  const tried = await sendWithFallback(plan ? plan.upstreams : deps.upstreams, {
    endpoint,
    body: parsed.body,
    offerings: targets,
    signal: deps.signal,
    proceed: deps.proceed,
    line: { batchId, lineNo, attempt: line.attempts },
    lora: adapter ? { name: adapter.id, path: adapter.source } : undefined,
  })
  // Not sent (cancelled, or its provider went down while it waited): handed back as it was,
  // its attempt unused; a cancelled batch ends it.
  if (tried === null) return { batchId, lineNo, kind: 'retry', notBefore: Date.now(), unsent: true }
  const { outcome, offering } = tried
  if (outcome.ok) {
    // An answer that is not the JSON the line asked for: failed, not billed, the body kept.
    const wrong =
      endpoint === 'chat'
        ? structuredAnswerProblem(parsed.body.response_format, outcome.body)
        : null
    if (wrong !== null) {
      return fail(
        line,
        { code: 'structured_output_invalid', message: wrong, upstream: outcome.body },
        outcome.status,
        offering.provider,
        outcome.latencyMs,
      )
    }
    const bounds = lineBounds(
      endpoint,
      parsed.body,
      model,
      upstreamTargets(deps.catalog, offerings),
    )
    const usage = outcome.usage ?? estimateUsage(endpoint, parsed.body, outcome.body, bounds)
    const costUsd = priceUsage(usage, offering)
    const answer = {
      batchId,
      lineNo,
      kind: 'succeeded' as const,
      responseStatus: outcome.status,
      response: storedResponse(outcome),
      provider: offering.provider,
      latencyMs: Math.round(outcome.latencyMs),
      accounting: {
        model: model.id,
        inputTokens: usage.input_tokens,
        outputTokens: usage.output_tokens,
        // The planner's saving (SPEC §13) is measured against the first listed offering.
        firstOfferingCostUsd:
          model.offerings[0] === offering ? costUsd : priceUsage(usage, model.offerings[0]),
      },
    }
    // A capped batch's line was let in for its ceiling: it is never billed more, so the batch's
    // cost never passes max_cost_usd (SPEC §12), whatever the upstream reports.
    if (line.ceilingUsd !== undefined && new Money(line.ceilingUsd).lessThan(costUsd))
      return { ...answer, costUsd: line.ceilingUsd, ceilingUsd: line.ceilingUsd }
    return { ...answer, costUsd, ...overrun(usage, costUsd, bounds, offerings) }
  }
  const { error, latencyMs } = outcome
  // The provider failed as a whole (its last replica became unreachable with this call): the line
  // was not served, and waits for it, or for another offering, without using an attempt. A 429
  // is an answer: it counts (and pauses the provider).
  if (
    plan &&
    error.retryable &&
    error.kind !== 'rate_limited' &&
    plan.planner.unreachable(offering.provider)
  )
    return { batchId, lineNo, kind: 'retry', notBefore: Date.now() + HOLD_MS, unsent: true }
  const delay = retryDelay(deps.retry, error, line.attempts)
  if (delay !== null) return { batchId, lineNo, kind: 'retry', notBefore: Date.now() + delay }
  return fail(line, lineError(error, line.attempts), error.status, offering.provider, latencyMs)
}
const providerNames = new WeakMap<readonly Offering[], string[]>()

/** The providers of an offerings list (the catalog hands out one array per routing: named once). */
function providersOf(offerings: readonly Offering[]): string[] {
  let names = providerNames.get(offerings)
  if (!names) providerNames.set(offerings, (names = offerings.map((o) => o.provider)))
  return names
}

/**
 * The response as stored and returned as one line of results: the upstream's own text when it
 * is that body unchanged and on one line (saves a stringify per line), else re-serialized.
 */
function storedResponse(outcome: Extract<Outcome, { ok: true }>): string {
  if (outcome.text !== undefined && !LINE_BREAK.test(outcome.text)) return outcome.text
  return JSON.stringify(outcome.body)
}

const LINE_BREAK = /[\r\n]/

function fail(
  line: ClaimedLine,
  error: LineError,
  status: number | null,
  provider: string | null,
  latencyMs: number | null,
): LineOutcome {
  return {
    batchId: line.batchId,
    lineNo: line.lineNo,
    kind: 'failed',
    error,
    responseStatus: status,
    costUsd: '0',
    provider,
    latencyMs: latencyMs === null ? null : Math.round(latencyMs),
  }
}

function lineError(error: UpstreamError, attempts: number): LineError {
  switch (error.kind) {
    case 'invalid_request':
      return { code: 'invalid_request', message: error.message, upstream: error.body }
    case 'context_length_exceeded':
      return { code: 'context_length_exceeded', message: error.message, upstream: error.body }
    case 'auth':
      return {
        code: 'upstream_error',
        message:
          "the provider refused the gateway's credentials; the operator must fix its API key",
      }
    default:
      return {
        code: 'upstream_error',
        message: `${error.message} (gave up after ${attempts} attempt${attempts === 1 ? '' : 's'})`,
      }
  }
}

/** The line's token bounds, as admission counted them for its ceiling (the same arithmetic). */
function lineBounds(
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
    output: chatOutputBound(chat, model, targets),
  }
}

/**
 * An upstream that reported more than the line's ceiling allows: the outcome carries the
 * ceiling, so the line is billed its real cost, the overrun is logged and settlement takes the
 * excess from the account's free credit, not from what is held for other lines. Tokens within
 * both bounds cannot cost more than the ceiling (priced at the dearest offering), so the decimal
 * arithmetic runs only when a bound is passed.
 */
function overrun(
  usage: Usage,
  costUsd: string,
  bounds: { input: number; output: number },
  offerings: readonly Offering[],
): { ceilingUsd?: string } {
  if (usage.input_tokens <= bounds.input && usage.output_tokens <= bounds.output) return {}
  const ceiling = priceOf(bounds, highestPrices(offerings))
  return ceiling.lessThan(costUsd) ? { ceilingUsd: ceiling.toFixed() } : {}
}

/**
 * An upstream that answers without usage is billed on a bound instead: the prompt's pessimistic
 * token count and one token per byte of what came back. Never more than the ceiling held.
 */
function estimateUsage(
  endpoint: 'chat' | 'embeddings',
  body: Record<string, unknown>,
  response: Record<string, unknown>,
  bounds: { input: number; output: number },
): Usage {
  if (endpoint === 'embeddings') return { input_tokens: bounds.input, output_tokens: 0 }
  const choices = (response.choices as { message?: { content?: unknown } }[] | undefined) ?? []
  let output = 0
  for (const choice of choices) {
    const content = choice.message?.content
    if (typeof content === 'string') output += Buffer.byteLength(content, 'utf8')
  }
  return { input_tokens: bounds.input, output_tokens: Math.min(output, bounds.output) }
}
