/**
 * Runs one claimed line: sends it to its offerings (send-with-fallback.ts: the next on a
 * retryable failure when the line allows it) and turns what happened into an outcome to record. Failures that belong to the line are returned as data, never thrown.
 */
import type { Outcome, Usage, UpstreamError } from '../../providers/types.ts'
import { isFineTuneId, loraOfferings, type FineTuneRecord } from '../catalog/fine-tunes.ts'
import type { ModelEntry, Offering } from '../catalog/catalog-file.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { endpointOf, upstreamTargets } from '../catalog/catalog.ts'
import type { LineError } from '../domain.ts'
import { answerBytes, usageOnBound } from '../pricing/bill-on-bound.ts'
import { priceUsage } from '../pricing/price-usage.ts'
import { capPromptBound } from '../pricing/cap-bound.ts'
import type { SchemaChecks } from '../schemas/schema-checks.ts'
import type { ClaimedLine, LineOutcome } from '../store/store.ts'
import { sendWithFallback, type Tried } from '../upstream/send-with-fallback.ts'
import type { Upstreams } from '../upstream/upstreams.ts'
import { offeringsTaking } from '../catalog/speaks-api.ts'
import { heldForLane } from './batch-lane/choose-batch-lane.ts'
import { lineAccounting, lineUsage } from './billed-usage.ts'
import { judgeAnswer, judgedError } from './judge-answer.ts'
import { cappedAt, lineBounds, overrun, passesBounds, uncheckedCost } from './line-ceiling.ts'
import { answerFor, lineRequest } from './line-request.ts'
import { retryDelay, type RetryPolicy } from './retry-policy.ts'
import type { PlannedBatch, SpillPlanner } from './spill-planner.ts'
import { limitsOf } from '../catalog/catalog-file.ts'

/** A line no allowed provider can take now is claimed again after this long (ms). */
export const HOLD_MS = 1_000

/** The planner's part in running a batch line (docs/routing.md). */
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
  /** Ends the line's wait for a provider's slot, unsent (its batch stopped: stopped-batches.ts). */
  waitSignal?: AbortSignal
  /** False once the line's batch stopped dispatching (cancelled) or reached its deadline while the line waited. */
  proceed?: () => boolean
  /** The planner's choice of offering (batch lines); without it the line goes in catalog order. */
  plan?: LinePlan
  /** A fine-tune by its `ft:` id (the gateway's fine-tune directory); unset, no line names one. */
  fineTunes?: (id: string) => Promise<FineTuneRecord | null>
  /** Where answers are judged against their line's json_schema; unset, in-process (inline-checks.ts). */
  schemaChecks?: SchemaChecks
  /**
   * The line keeps to batch lane `lane` (allow_fallbacks false), which took no lines after
   * `closedAtMs`: it waits for its batch's deadline, which ends it expired.
   */
  laneClosed?: (line: ClaimedLine, lane: string, closedAtMs: number) => void
}

export async function runLine(line: ClaimedLine, deps: RunLineDeps): Promise<LineOutcome> {
  const { batchId, lineNo } = line
  const input = JSON.parse(line.input) as { url: string; body: Record<string, unknown> }
  const request = lineRequest(input)
  if ('problem' in request) return fail(line, { code: 'invalid_request', message: request.problem })
  const parsed = { url: input.url, body: request.body }
  const endpoint = endpointOf(parsed.url)
  const named = String(parsed.body.model)
  // A fine-tune's line runs on its base's LoRA offerings, the fine-tune loaded where it goes.
  const found = isFineTuneId(named) && deps.fineTunes ? await deps.fineTunes(named) : null
  const fineTune = found?.accountId === line.accountId ? found : null
  const model = deps.catalog.find(fineTune ? fineTune.baseModel : named)
  const routing = parsed.body.provider as never
  const plan = deps.plan
  // Measured only when its price cap is below a long-context tier: as admission routed it.
  const capBound = model && capPromptBound(deps.catalog, endpoint, parsed.body, model)
  const routed = !model
    ? []
    : plan
      ? deps.catalog.routeBatch(model, routing, capBound)
      : deps.catalog.route(model, routing, capBound)
  const served = fineTune ? loraOfferings(deps.catalog, routed) : routed
  if (!model || served.length === 0 || (isFineTuneId(named) && !fineTune)) {
    return fail(line, {
      code: 'invalid_request',
      message: `model ${String(parsed.body.model)} is no longer served by this gateway`,
    })
  }
  // Fields its chat body left out keep a Responses or Messages line to offerings that take it as it came.
  const offerings = offeringsTaking(deps.catalog, served, request.native)
  if (offerings === null)
    return fail(line, { code: 'invalid_request', message: request.native!.untranslated! })
  // Past the deadline nothing new is sent: hand the line back, the batch's expiry ends it.
  const now = Date.now()
  if (now >= line.deadlineAt * 1000)
    return { batchId, lineNo, kind: 'retry', notBefore: now, unsent: true }

  // The planner picks where the line starts; on a failure it may still fall back to the dearer
  // offerings after that one, one at a time.
  let targets = offerings
  if (plan) {
    // A line kept to the batch lane it was marked for is never sent live (allow_fallbacks
    // false); an unmarked one never went to a lane, so its first live offering is the one.
    const held =
      fineTune || line.batchLane === undefined
        ? null
        : heldForLane(deps.catalog, { request, model, routing, capBound }, plan.batch, now)
    if (held?.closed) deps.laneClosed?.(line, held.closed.lane, held.closed.closedAtMs)
    if (held) return { batchId, lineNo, kind: 'retry', notBefore: held.untilMs, unsent: true }
    const choice = plan.planner.choose(plan.batch, providersOf(offerings), plan.unsent, now)
    if (choice.kind === 'hold')
      return { batchId, lineNo, kind: 'retry', notBefore: now + HOLD_MS, unsent: true }
    if (choice.index > 0) targets = offerings.slice(choice.index)
  }
  const tried = await sendWithFallback(plan ? plan.upstreams : deps.upstreams, {
    endpoint,
    body: parsed.body,
    passThrough: request.native,
    offerings: targets,
    modelLimits: limitsOf(model),
    signal: deps.signal,
    waitSignal: deps.waitSignal,
    proceed: deps.proceed,
    line: { batchId, lineNo, attempt: line.attempts },
    // An account's lines due earlier are served first where a provider is full (docs/open-models.md).
    place: { account: line.accountId, deadlineMs: line.deadlineAt * 1000 },
    fineTune: fineTune ? { name: fineTune.id, path: fineTune.source } : undefined,
  })
  // Not sent (cancelled, or its provider went down while it waited): handed back as it was,
  // its attempt unused; a cancelled batch ends it.
  if (tried === null) return { batchId, lineNo, kind: 'retry', notBefore: Date.now(), unsent: true }
  const { outcome, offering } = tried
  if (outcome.ok) {
    // The answer in the API the line came in: what its result shows, also a failed one's `upstream`.
    const answered = answerFor(outcome, request, deps.catalog, offering)
    const verdict =
      endpoint === 'chat'
        ? await judgeAnswer(
            parsed.body.response_format,
            outcome.body,
            line.accountId,
            deps.schemaChecks,
          )
        : null
    const judged = judgedError(verdict, answered.body)
    // An answer that is not the JSON the line asked for: failed, not billed, the body kept.
    if (judged?.code === 'structured_output_invalid') return fail(line, judged, tried)
    const bounds = lineBounds(
      endpoint,
      parsed.body,
      model,
      upstreamTargets(deps.catalog, offerings),
    )
    const usage = outcome.usage ?? usageOnBound(bounds, answerBytes(outcome.body))
    const costUsd = priceUsage(usage, offering)
    // Past a bound, the ceiling the upstream's report may overrun; within both, none.
    const over = passesBounds(usage, bounds) ? overrun(costUsd, bounds, offerings, parsed.body) : {}
    const answer = {
      batchId,
      lineNo,
      kind: 'succeeded' as const,
      responseStatus: outcome.status,
      response: storedResponse(answered),
      provider: offering.provider,
      latencyMs: Math.round(outcome.latencyMs),
      usage: lineUsage(usage, offering, costUsd),
      accounting: lineAccounting(model, usage, offering, costUsd),
    }
    // One whose check passed the budget (docs/webhooks-and-streams.md): failed, and billed as the answer it is (the
    // upstream answered; the schema is the caller's), never past its ceiling.
    if (judged?.code === 'structured_output_unchecked') {
      const ceilingUsd = line.ceilingUsd ?? over.ceilingUsd
      return {
        ...fail(line, judged, tried),
        costUsd: uncheckedCost({ costUsd, ceilingUsd }),
        usage: answer.usage,
        accounting: answer.accounting,
      }
    }
    // A capped batch's line is never billed past the ceiling it was let in for (cappedAt).
    return { ...answer, ...(cappedAt(line.ceilingUsd, costUsd) ?? { costUsd, ...over }) }
  }
  const { error } = outcome
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
  return fail(line, lineError(error, line.attempts), tried)
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

/** The line failed with `error`: after the call `tried`, or before any was made (none). */
function fail(
  line: ClaimedLine,
  error: LineError,
  tried?: Tried<Outcome>,
): Extract<LineOutcome, { kind: 'failed' }> {
  const outcome = tried?.outcome
  return {
    batchId: line.batchId,
    lineNo: line.lineNo,
    kind: 'failed',
    error,
    responseStatus:
      outcome === undefined ? null : outcome.ok ? outcome.status : outcome.error.status,
    costUsd: '0',
    provider: tried === undefined ? null : tried.offering.provider,
    latencyMs: outcome === undefined ? null : Math.round(outcome.latencyMs),
  }
}

export function lineError(error: UpstreamError, attempts: number): LineError {
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
