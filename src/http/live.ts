/**
 * Live endpoints (SPEC §8): chat completions (also streamed as server-sent events), embeddings
 * and the model list, through the same catalog, adapters and prices as batches. Each call is held
 * before it is sent — its ceiling reserved from the instance's credit ledger (live-credit.ts),
 * 402 when it does not fit, 429 when it would pass the account's daily spend limit — and settled from usage when the answer arrives; a call that failed
 * releases its hold. Mounted at the root and under /openai/v1.
 */
import { Elysia } from 'elysia'
import { isAdapterId, loraOfferings, NO_ADAPTERS, type AdapterLookup } from '../catalog/adapters.ts'
import type { Offering } from '../catalog/catalog-file.ts'
import type { Endpoint, UpstreamError } from '../../providers/types.ts'
import { dailyLimitRefusal } from '../admission/submit-batch.ts'
import type { Authenticator } from '../auth/authenticate.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { ENDPOINT_URLS } from '../domain.ts'
import { badRequest, refuse, type GatewayError } from '../errors.ts'
import { readJsonBody, type BodyLimit } from '../ingest/read-body.ts'
import { renderAdapterModel } from './render-model.ts'
import { validateBody } from '../ingest/validate-body.ts'
import { usd } from '../money/decimal.ts'
import { ceilingUnits, unitsText, usageUnits } from '../money/fixed-point.ts'
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
  /** Told of each call's charge: the usage report and the metrics count it (SPEC §10). */
  charged?: (charge: LiveCharge) => void
}

/** A live call as charged. */
export interface LiveCharge {
  accountId: string
  model: string
  provider: string
  usage: { input_tokens: number; output_tokens: number }
  costUsd: string
  /** The same usage on the model's first listed offering. */
  firstOfferingCostUsd: string
}

const encoder = new TextEncoder()

export function liveRoutes(prefix: string, deps: LiveDeps) {
  const { auth, credit, catalog, upstreams, logger } = deps

  async function readJson(request: Request, headers: Record<string, string>) {
    // The key first: an unknown caller's body is never read.
    const caller = await auth.authenticate(
      request.headers.get('authorization'),
      'inference',
      headers,
    )
    const read = await readJsonBody(request, deps.bodyLimit)
    if (!read.ok || read.value === undefined)
      throw badRequest('the body must be a JSON object: the request for this endpoint')
    return { caller, raw: read.value }
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
    if (!checked.ok) {
      const problem = checked.problems[0]
      const message = `${problem.path || 'body'} ${problem.message}; ${problem.fix}`
      // As OpenAI answers a model the caller cannot use: 404 model_not_found.
      if (problem.code === 'model_not_found')
        throw refuse('model_not_found', message, { param: problem.path || null })
      throw badRequest(message, problem.path || null)
    }
    const { offerings, inputTokens, outputTokens, adapter } = checked.value
    // The same pessimistic arithmetic as a batch's ceiling (priceOf ∘ highestPrices), so the two
    // can never disagree, in integers: this runs on every call.
    const ceiling = ceilingUnits({ input: inputTokens, output: outputTokens }, offerings)
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

  /**
   * An answer without usage is billed on a bound, as a batch line is (run-line.ts): the prompt's
   * pessimistic count and one token per byte of what came back, never past the output bound.
   */
  const estimated = (checked: Prepared, outputBytes: number) => ({
    input_tokens: checked.inputTokens,
    output_tokens: Math.min(outputBytes, checked.outputTokens),
  })

  const billedUsage = (
    checked: Prepared,
    usage: { input_tokens: number; output_tokens: number } | null,
    response: Record<string, unknown>,
    offering: Offering,
  ) => {
    if (usage) return usage
    logger.warn('live.no_usage', { provider: offering.provider, model: offering.upstream_model })
    return estimated(checked, contentBytes(response))
  }

  /** Settles the call on `usage` and tells whoever counts charges. */
  const settleOn = (
    checked: Prepared,
    usage: { input_tokens: number; output_tokens: number },
    offering: Offering,
  ) => {
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
        body,
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
  ) {
    const checked = await prepare(input, 'chat')
    const { body, offerings, reservation, lora } = checked
    const wantsUsage = streamOptions(input.raw)?.include_usage === true
    const release = (reason: unknown) => {
      credit.settle(reservation, null)
      if (reason !== undefined) logger.warn('live.stream_settle_failed', { reason: String(reason) })
    }
    let streaming = false
    try {
      const { outcome, offering, done } = await streamWithFallback(upstreams, {
        endpoint: 'chat',
        body,
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
            let next = await chunks.next()
            // The upstream is always asked for usage (billing needs it); the client gets the
            // usage-only chunk only when it asked, as OpenAI does: clients that read
            // chunk.choices[0] break on one they did not ask for.
            while (!next.done && !wantsUsage && isUsageOnly(next.value)) next = await chunks.next()
            if (next.done) {
              ended = true
              controller.enqueue(encoder.encode('data: [DONE]\n\n'))
              controller.close()
            } else {
              outputBytes += deltaBytes(next.value)
              const chunk = wantsUsage ? next.value : withoutUsage(next.value)
              controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`))
            }
          } catch (reason) {
            controller.enqueue(
              encoder.encode(
                `data: ${JSON.stringify({ error: { message: 'the upstream stream broke off', type: 'server_error', code: 'upstream_error', param: null } })}\n\n`,
              ),
            )
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

function pricingOf(offerings: readonly Offering[]) {
  return offerings.map((o) => ({
    provider: o.provider,
    input_usd_per_mtok: o.input_usd_per_mtok,
    output_usd_per_mtok: o.output_usd_per_mtok,
  }))
}

/** UTF-8 bytes of the message contents of a whole answer. */
function contentBytes(response: Record<string, unknown>): number {
  let bytes = 0
  for (const choice of (response.choices as { message?: { content?: unknown } }[] | undefined) ??
    []) {
    if (typeof choice.message?.content === 'string')
      bytes += Buffer.byteLength(choice.message.content, 'utf8')
  }
  return bytes
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
