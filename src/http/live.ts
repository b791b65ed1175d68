/**
 * Live endpoints (docs/live.md): chat completions (also streamed as server-sent events), embeddings
 * and the model list, through the same catalog, adapters and prices as batches. Each call is held
 * before it is sent — its ceiling reserved from the instance's credit ledger (live-credit.ts),
 * 402 when it does not fit, 429 when it would pass the account's daily spend limit — and settled from usage when the answer arrives; a call that failed
 * releases its hold. Mounted at the root and under /openai/v1.
 */
import { Elysia } from 'elysia'
import { isAdapterId, loraOfferings, NO_ADAPTERS, type AdapterLookup } from '../catalog/adapters.ts'
import type { Offering } from '../catalog/catalog-file.ts'
import type { Endpoint, PassThrough, UpstreamError, Usage } from '../../providers/types.ts'
import { dailyLimitRefusal } from '../admission/submit-batch.ts'
import type { Authenticator } from '../auth/authenticate.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { ENDPOINT_URLS } from '../domain.ts'
import { badRequest, refuse, type GatewayError } from '../errors.ts'
import { readJsonBody, type BodyLimit } from '../ingest/read-body.ts'
import { renderAdapterModel } from './render-model.ts'
import { validateBody } from '../ingest/validate-body.ts'
import { compileProblems } from '../ingest/check-structured.ts'
import type { SchemaChecks } from '../schemas/schema-checks.ts'
import { usd } from '../money/decimal.ts'
import { answerBytes, usageOnBound } from '../pricing/bill-on-bound.ts'
import { unitsText } from '../money/fixed-point.ts'
import { ceilingUnits } from '../pricing/ceiling-rates.ts'
import { priceUsageUnits } from '../pricing/price-usage.ts'
import type { LiveCredit } from '../live/live-credit.ts'
import type { Logger } from '../telemetry/logger.ts'
import { sendWithFallback, streamWithFallback } from '../upstream/send-with-fallback.ts'
import type { Upstreams } from '../upstream/upstreams.ts'

export interface LiveDeps {
  auth: Authenticator
  credit: LiveCredit
  catalog: Catalog
  upstreams: Upstreams
  logger: Logger
  createdAt: number
  /** The body limit of a live call (MULTIGRID_MAX_LIVE_BODY_BYTES, body-limits.ts). */
  bodyLimit: BodyLimit
  /** An account's active fine-tuned adapters (the adapter directory: cached). */
  adapters: (accountId: string) => Promise<AdapterLookup>
  /** Where a call's json_schema is compiled, within its budget (docs/structured-outputs.md). */
  schemaChecks: SchemaChecks
  /** Told of each call's charge: the usage report and the metrics count it (docs/operations.md). */
  charged?: (charge: LiveCharge) => void
}

/** A live call as charged. */
export interface LiveCharge {
  accountId: string
  model: string
  provider: string
  usage: Usage
  costUsd: string
  /** The same usage on the model's first listed offering. */
  firstOfferingCostUsd: string
}

const encoder = new TextEncoder()

/**
 * How a streamed chat call is written to the client: OpenAI's chunks as they are by default; the
 * Anthropic and Responses surfaces translate each chunk into their own events (docs/clients/anthropic-sdk.md).
 */
export interface StreamRender {
  /** The text written for one chat.completion.chunk (may be empty). */
  chunk(value: Record<string, unknown>): string
  /** The text written once the upstream ended, with the usage it reported. */
  end(usage: Usage | null): string
  /** The text written when the upstream broke off mid-stream. */
  broken(): string
}

/**
 * The upstream is always asked for usage (billing needs it); the client gets the usage-only chunk
 * only when it asked (`stream_options.include_usage`), as OpenAI does: clients that read
 * `chunk.choices[0]` break on one they did not ask for.
 */
const openAiSse = (wantsUsage: boolean): StreamRender => ({
  chunk: (value) => {
    if (wantsUsage) return `data: ${JSON.stringify(value)}\n\n`
    return isUsageOnly(value) ? '' : `data: ${JSON.stringify(withoutUsage(value))}\n\n`
  },
  end: () => 'data: [DONE]\n\n',
  broken: () =>
    `data: ${JSON.stringify({ error: { message: 'the upstream stream broke off', type: 'server_error', code: 'upstream_error', param: null } })}\n\n`,
})

/**
 * A call as read: who, and the chat body that is validated, priced and held. `passThrough` is set
 * for a call in a provider's own API sent as it came to providers that speak it (docs/openai-facade.md: the
 * Responses API, Anthropic's Messages API): that body goes upstream instead, and its answer
 * comes back untranslated.
 */
export interface LiveInput {
  caller: Awaited<ReturnType<Authenticator['authenticate']>>
  raw: unknown
  passThrough?: { body: Record<string, unknown>; api: PassThrough }
}

/** The live call itself (hold, send, settle), for the routes below and the other surfaces' routes. */
export type LiveService = ReturnType<typeof liveService>

export function liveService(deps: LiveDeps) {
  const { auth, credit, catalog, upstreams, logger } = deps

  /** `authorization` is the header's value, or what another surface's key header amounts to. */
  async function readJson(
    request: Request,
    headers: Record<string, string>,
    authorization: string | null = request.headers.get('authorization'),
  ) {
    // The key first: an unknown caller's body is never read.
    const caller = await auth.authenticate(authorization, 'inference', headers)
    const read = await readJsonBody(request, deps.bodyLimit)
    if (!read.ok || read.value === undefined)
      throw badRequest('the body must be a JSON object: the request for this endpoint')
    // `passThrough`: what is sent instead of the validated body (LiveInput).
    return { caller, raw: read.value } as LiveInput
  }

  async function prepare(
    { caller, raw }: Awaited<ReturnType<typeof readJson>>,
    endpoint: Endpoint,
  ) {
    // Only a call that names an `ft:` model looks the account's adapters up.
    const named = (raw as { model?: unknown } | null)?.model
    const adapters =
      typeof named === 'string' && isAdapterId(named)
        ? await deps.adapters(caller.account.id)
        : NO_ADAPTERS
    const checked = validateBody(raw, endpoint, catalog, '', { live: true, adapters })
    // Within its bounds (checked above): compiled on a schema thread, refused past the budget.
    const schemaText = checked.ok ? checked.value.schemaText : undefined
    if (schemaText !== undefined) {
      const verdict = await deps.schemaChecks.compile(schemaText, caller.account.id)
      const { problem } = compileProblems(verdict, (field) => field)
      if (problem)
        throw badRequest(`${problem.path} ${problem.message}; ${problem.fix}`, problem.path)
    }
    if (!checked.ok) {
      const problem = checked.problems[0]
      const message = `${problem.path || 'body'} ${problem.message}; ${problem.fix}`
      // As OpenAI answers a model the caller cannot use: 404 model_not_found.
      if (problem.code === 'model_not_found')
        throw refuse('model_not_found', message, { param: problem.path || null })
      throw badRequest(message, problem.path || null)
    }
    const { offerings, inputTokens, outputTokens, adapter, rates } = checked.value
    // The same pessimistic arithmetic as a batch's ceiling (priceOf at ceilingRates), so the two
    // can never disagree, in integers: this runs on every call.
    const ceiling = ceilingUnits({ input: inputTokens, output: outputTokens }, rates)
    // Held before it is sent: from this instance's lease of the account's credit (no store
    // write unless the lease must grow), atomically against every other holder.
    const held = await credit.reserve(caller.account.id, ceiling)
    if (!held.ok && held.dailyLimit) throw dailyLimitRefusal(held.dailyLimit, 'this request')
    if (!held.ok) {
      const ceilingUsd = usd(unitsText(ceiling))
      throw refuse(
        'insufficient_quota',
        `this request may cost up to $${ceilingUsd} and the account has $${usd(held.availableUsd)} available; add credit or lower max_tokens`,
        { detail: { cost_ceiling_usd: ceilingUsd, available_usd: usd(held.availableUsd) } },
      )
    }
    return {
      caller,
      model: checked.value.model,
      body: raw as Record<string, unknown>,
      offerings,
      inputTokens,
      outputTokens,
      reservation: held.reservation,
      lora: adapter ? { name: adapter.id, path: adapter.source } : undefined,
    }
  }
  type Prepared = Awaited<ReturnType<typeof prepare>>

  /** An answer without usage is billed on a bound, as a batch line is (pricing/bill-on-bound.ts). */
  const estimated = (checked: Prepared, outputBytes: number) =>
    usageOnBound({ input: checked.inputTokens, output: checked.outputTokens }, outputBytes)

  /** A live call is priced as a batch line is (pricing/price-usage.ts), in ledger units. */
  const usageUnits = priceUsageUnits

  const billedUsage = (
    checked: Prepared,
    usage: Usage | null,
    response: Record<string, unknown>,
    offering: Offering,
  ) => {
    if (usage) return usage
    logger.warn('live.no_usage', { provider: offering.provider, model: offering.upstream_model })
    return estimated(checked, answerBytes(response))
  }

  /** Settles the call on `usage` and tells whoever counts charges. */
  const settleOn = (checked: Prepared, usage: Usage, offering: Offering) => {
    // Settled once: a second settle is ignored by the ledger, and so is its charge here.
    if (checked.reservation.settled) return
    const units = usageUnits(usage, offering)
    credit.settle(checked.reservation, units)
    if (!deps.charged) return
    const first = checked.model.offerings[0]
    deps.charged({
      accountId: checked.caller.account.id,
      model: checked.model.id,
      provider: offering.provider,
      usage,
      costUsd: unitsText(units),
      firstOfferingCostUsd:
        first === offering ? unitsText(units) : unitsText(usageUnits(usage, first)),
    })
  }

  async function call(
    request: Request,
    input: Awaited<ReturnType<typeof readJson>>,
    endpoint: Endpoint,
  ) {
    const checked = await prepare(input, endpoint)
    const { body, offerings, reservation, lora } = checked
    try {
      // Never null: a live call has no proceed() that could skip it.
      const { outcome, offering } = (await sendWithFallback(upstreams, {
        endpoint,
        body: input.passThrough?.body ?? body,
        passThrough: input.passThrough?.api,
        offerings,
        signal: request.signal,
        lora,
      }))!
      if (!outcome.ok) throw upstreamFailure(outcome.error)
      settleOn(checked, billedUsage(checked, outcome.usage, outcome.body, offering), offering)
      // The object, not the upstream's own text in a Response: Elysia rebuilds a returned
      // Response to add the rate-limit headers, its body as a stream, and that cost more than
      // the serialization it saved (bench:proxy, issue 15). Nor as a string with its content
      // type: Bun's Response of the text cost as much as Response.json of the object (0.65
      // against 0.67 µs), so passing the text through saved nothing.
      return outcome.body
    } finally {
      // Failed upstream, or threw: the whole hold comes back (a settled one is left alone).
      credit.settle(reservation, null)
    }
  }

  async function stream(
    request: Request,
    headers: Record<string, string>,
    input: Awaited<ReturnType<typeof readJson>>,
    asked?: StreamRender,
  ) {
    const checked = await prepare(input, 'chat')
    const { body, offerings, reservation, lora } = checked
    const render = asked ?? openAiSse(streamOptions(input.raw)?.include_usage === true)
    const release = (reason: unknown) => {
      credit.settle(reservation, null)
      if (reason !== undefined) logger.warn('live.stream_settle_failed', { reason: String(reason) })
    }
    let streaming = false
    try {
      const { outcome, offering, done } = await streamWithFallback(upstreams, {
        endpoint: 'chat',
        body: input.passThrough?.body ?? body,
        passThrough: input.passThrough?.api,
        offerings,
        signal: request.signal,
        lora,
      })
      if (!outcome.ok) throw upstreamFailure(outcome.error)
      streaming = true
      const chunks = outcome.chunks[Symbol.asyncIterator]()
      let ended = false
      let outputBytes = 0
      // Settled when the usage arrives. A stream that ended without usage is billed on the
      // bound (as a whole answer is); one that broke or was abandoned settles what the upstream
      // reported by then, or gives the hold back when it reported nothing.
      outcome.usage
        .then((usage) => {
          if (usage) return settleOn(checked, usage, offering)
          // The usage settles a few microtasks before pull() sees the end: decide after it.
          setImmediate(() => {
            if (!ended) return credit.settle(reservation, null)
            logger.warn('live.no_usage', {
              provider: offering.provider,
              model: offering.upstream_model,
            })
            settleOn(checked, estimated(checked, outputBytes), offering)
          })
        })
        .catch(release)
        .finally(done)
      // Each chunk is written as it arrives: no buffering between upstream and client.
      const sse = new ReadableStream<Uint8Array>({
        async pull(controller) {
          try {
            // Until something is written: a pull that enqueues nothing is not called again.
            for (;;) {
              const next = await chunks.next()
              if (next.done) {
                ended = true
                const usage = await outcome.usage.catch(() => null)
                controller.enqueue(encoder.encode(render.end(usage)))
                controller.close()
                return
              }
              outputBytes += deltaBytes(next.value)
              const text = render.chunk(next.value)
              if (text) return controller.enqueue(encoder.encode(text))
            }
          } catch (reason) {
            controller.enqueue(encoder.encode(render.broken()))
            controller.close()
            logger.warn('live.stream_broken', { reason: String(reason) })
          }
        },
        async cancel() {
          await chunks.return?.()
        },
      })
      return new Response(sse, {
        headers: {
          ...headers,
          'content-type': 'text/event-stream',
          'cache-control': 'no-cache',
          connection: 'keep-alive',
        },
      })
    } finally {
      if (!streaming) release(undefined)
    }
  }

  return { readJson, call, stream }
}

export function liveRoutes(prefix: string, deps: LiveDeps) {
  const { auth, catalog } = deps
  const { readJson, call, stream } = liveService(deps)

  /** The catalog's models that can be called here, OpenAI's model objects with their prices. */
  const catalogModels = () =>
    catalog.models
      .filter((model) => catalog.usable(model).length > 0)
      .map((model) => ({
        id: model.id,
        object: 'model',
        created: deps.createdAt,
        owned_by: model.offerings[0].provider,
        endpoints: model.endpoints,
        aliases: model.aliases,
        context_tokens: model.context_tokens,
        max_output_tokens: model.max_output_tokens,
        pricing: pricingOf(catalog.usable(model)),
      }))

  return new Elysia({ name: `live${prefix}`, prefix })
    .get('/v1/models', async ({ request, set }) => {
      const caller = await auth.authenticate(
        request.headers.get('authorization'),
        'any',
        set.headers as Record<string, string>,
      )
      // The caller's own fine-tuned models, after the catalog's, each with its base as `parent`
      // and what it inherits from it: endpoints, limits, and its prices (its LoRA offerings').
      const adapters = [...(await deps.adapters(caller.account.id)).values()].map((adapter) => {
        const base = catalog.find(adapter.baseModel)
        return {
          ...renderAdapterModel(adapter),
          endpoints: base?.endpoints ?? [],
          context_tokens: base?.context_tokens ?? null,
          max_output_tokens: base?.max_output_tokens ?? null,
          pricing: base ? pricingOf(loraOfferings(catalog, catalog.usable(base))) : [],
        }
      })
      return {
        object: 'list',
        data: [...catalogModels(), ...adapters],
      }
    })
    .post(
      ENDPOINT_URLS.chat,
      async ({ request, set }) => {
        const headers = set.headers as Record<string, string>
        const input = await readJson(request, headers)
        const wantsStream = (input.raw as { stream?: unknown } | null)?.stream === true
        return wantsStream ? stream(request, headers, input) : call(request, input, 'chat')
      },
      { parse: 'none' },
    )
    .post(
      ENDPOINT_URLS.embeddings,
      async ({ request, set }) =>
        call(request, await readJson(request, set.headers as Record<string, string>), 'embeddings'),
      { parse: 'none' },
    )
}

/** Each offering's prices: the class rates and long-context tier it sets (docs/pricing.md), its lane. */
function pricingOf(offerings: readonly Offering[]) {
  return offerings.map((o) => ({
    provider: o.provider,
    lane: o.lane ?? 'live',
    input_usd_per_mtok: o.input_usd_per_mtok,
    output_usd_per_mtok: o.output_usd_per_mtok,
    ...(o.cached_input_usd_per_mtok && { cached_input_usd_per_mtok: o.cached_input_usd_per_mtok }),
    ...(o.cache_write_usd_per_mtok && { cache_write_usd_per_mtok: o.cache_write_usd_per_mtok }),
    ...(o.cache_write_1h_usd_per_mtok && {
      cache_write_1h_usd_per_mtok: o.cache_write_1h_usd_per_mtok,
    }),
    ...(o.long_context && { long_context: o.long_context }),
  }))
}

const streamOptions = (raw: unknown) =>
  (raw as { stream_options?: { include_usage?: unknown } | null } | null)?.stream_options

/** The final chunk of a stream asked with `include_usage`: usage and no choices. */
const isUsageOnly = (chunk: Record<string, unknown>) =>
  Array.isArray(chunk.choices) && chunk.choices.length === 0 && chunk.usage != null

/** A chunk as a client that did not ask for usage gets it (some servers add usage to every chunk). */
function withoutUsage(chunk: Record<string, unknown>): Record<string, unknown> {
  if (!('usage' in chunk)) return chunk
  const { usage: _, ...rest } = chunk
  return rest
}

/** UTF-8 bytes of the content deltas of one streamed chunk. */
function deltaBytes(chunk: Record<string, unknown>): number {
  let bytes = 0
  for (const choice of (chunk.choices as { delta?: { content?: unknown } }[] | undefined) ?? []) {
    if (typeof choice.delta?.content === 'string')
      bytes += Buffer.byteLength(choice.delta.content, 'utf8')
  }
  return bytes
}

function upstreamFailure(error: UpstreamError): GatewayError {
  switch (error.kind) {
    case 'rate_limited':
      return refuse('upstream_rate_limited', 'the provider is rate-limiting; retry later', {
        headers: error.retryAfterMs
          ? { 'retry-after': String(Math.ceil(error.retryAfterMs / 1000)) }
          : {},
      })
    case 'invalid_request':
    case 'context_length_exceeded':
      return refuse(error.kind, `the provider refused the request: ${error.message}`)
    case 'timeout':
      return refuse('upstream_timeout', 'the provider did not answer in time')
    default:
      return refuse('upstream_error', `the provider failed: ${error.message}`)
  }
}
