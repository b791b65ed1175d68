/**
 * Live endpoints (SPEC §8): chat completions (also streamed as server-sent events), embeddings
 * and the model list, through the same catalog, adapters, balance check and billing as batches.
 * Mounted at the root and under /openai/v1.
 */
import { Elysia } from 'elysia'
import type { Offering } from '../../providers/catalog.ts'
import type { Endpoint, UpstreamError } from '../../providers/types.ts'
import type { Gate } from '../auth/gate.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { badRequest, GatewayError } from '../errors.ts'
import { readJsonBody, type BodyLimit } from '../ingest/read-body.ts'
import { validateBody } from '../ingest/validate-body.ts'
import { highestPrices, priceOf } from '../money/ceiling.ts'
import { availableUsd, usd } from '../money/decimal.ts'
import { priceUsage } from '../money/price-usage.ts'
import type { AccountStore } from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'
import type { Upstreams } from '../upstream/upstreams.ts'

export interface LiveDeps {
  gate: Gate
  store: AccountStore
  catalog: Catalog
  upstreams: Upstreams
  logger: Logger
  createdAt: number
  /** The body limit of a live call (MULTIGRID_MAX_LIVE_BODY_BYTES, body-limits.ts). */
  bodyLimit: BodyLimit
}

const encoder = new TextEncoder()

export function liveRoutes(prefix: string, deps: LiveDeps) {
  const { gate, store, catalog, upstreams, logger } = deps

  async function readJson(request: Request, headers: Record<string, string>) {
    // The key first: an unknown caller's body is never read.
    const caller = await gate.admit(request.headers.get('authorization'), 'inference', headers)
    const read = await readJsonBody(request, deps.bodyLimit)
    if (!read.ok || read.value === undefined) throw badRequest('the body must be a JSON object: the request for this endpoint')
    return { caller, raw: read.value }
  }

  async function prepare({ caller, raw }: Awaited<ReturnType<typeof readJson>>, endpoint: Endpoint) {
    const checked = validateBody(raw, endpoint, catalog, '', { live: true })
    if (!checked.ok) {
      const problem = checked.problems[0]
      throw badRequest(`${problem.path || 'body'} ${problem.message}; ${problem.fix}`, problem.path || null)
    }
    const { offerings, inputTokens, outputTokens } = checked.value
    // The same pessimistic arithmetic as a batch's ceiling, so the two can never disagree.
    const ceiling = priceOf({ input: inputTokens, output: outputTokens }, highestPrices(offerings))
    // The account row was read with the key a moment ago, in the same request.
    const available = availableUsd(caller.account)
    if (available.lessThan(ceiling)) {
      throw new GatewayError(402, 'insufficient_quota', 'insufficient_quota',
        `this request may cost up to $${usd(ceiling)} and the account has $${usd(available)} available; add credit or lower max_tokens`,
        { detail: { cost_ceiling_usd: usd(ceiling), available_usd: usd(available) } })
    }
    return { caller, body: raw as Record<string, unknown>, offerings }
  }

  const bill = async (accountId: string, usage: { input_tokens: number; output_tokens: number } | null, offering: Offering) => {
    if (!usage) return
    await store.chargeAccount(accountId, priceUsage(usage, offering))
  }

  async function call(request: Request, input: Awaited<ReturnType<typeof readJson>>, endpoint: Endpoint) {
    const { caller, body, offerings } = await prepare(input, endpoint)
    let error: UpstreamError | null = null
    for (const offering of offerings) {
      const outcome = (await upstreams.send(endpoint, body, offering, request.signal))!
      if (outcome.ok) {
        await bill(caller.account.id, outcome.usage, offering)
        return outcome.body
      }
      error = outcome.error
      if (!error.retryable && error.kind !== 'auth') break
    }
    throw upstreamFailure(error!)
  }

  async function stream(request: Request, headers: Record<string, string>, input: Awaited<ReturnType<typeof readJson>>) {
    const { caller, body, offerings } = await prepare(input, 'chat')
    let error: UpstreamError | null = null
    for (const offering of offerings) {
      const { outcome, done } = await upstreams.stream('chat', body, offering, request.signal)
      if (!outcome.ok) {
        error = outcome.error
        if (!error.retryable && error.kind !== 'auth') break
        continue
      }
      const chunks = outcome.chunks[Symbol.asyncIterator]()
      outcome.usage
        .then((usage) => bill(caller.account.id, usage, offering))
        .catch((reason) => logger.warn('live.billing_failed', { reason: String(reason) }))
        .finally(done)
      // Each chunk is written as it arrives: no buffering between upstream and client.
      const sse = new ReadableStream<Uint8Array>({
        async pull(controller) {
          try {
            const next = await chunks.next()
            if (next.done) {
              controller.enqueue(encoder.encode('data: [DONE]\n\n'))
              controller.close()
            } else controller.enqueue(encoder.encode(`data: ${JSON.stringify(next.value)}\n\n`))
          } catch (reason) {
            controller.enqueue(encoder.encode(`data: ${JSON.stringify({ error: { message: 'the upstream stream broke off', type: 'server_error', code: 'upstream_error', param: null } })}\n\n`))
            controller.close()
            logger.warn('live.stream_broken', { reason: String(reason) })
          }
        },
        async cancel() {
          await chunks.return?.()
        },
      })
      return new Response(sse, {
        headers: { ...headers, 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' },
      })
    }
    throw upstreamFailure(error!)
  }

  return new Elysia({ name: `live${prefix}`, prefix })
    .get('/v1/models', async ({ request, set }) => {
      await gate.admit(request.headers.get('authorization'), 'any', set.headers as Record<string, string>)
      return {
        object: 'list',
        data: catalog.models
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
            pricing: catalog.usable(model).map((o) => ({
              provider: o.provider,
              input_usd_per_mtok: o.input_usd_per_mtok,
              output_usd_per_mtok: o.output_usd_per_mtok,
            })),
          })),
      }
    })
    .post('/v1/chat/completions', async ({ request, set }) => {
      const headers = set.headers as Record<string, string>
      const input = await readJson(request, headers)
      const wantsStream = (input.raw as { stream?: unknown } | null)?.stream === true
      return wantsStream ? stream(request, headers, input) : call(request, input, 'chat')
    }, { parse: 'none' })
    .post('/v1/embeddings', async ({ request, set }) =>
      call(request, await readJson(request, set.headers as Record<string, string>), 'embeddings'), { parse: 'none' })
}

function upstreamFailure(error: UpstreamError): GatewayError {
  switch (error.kind) {
    case 'rate_limited':
      return new GatewayError(429, 'rate_limit_error', 'upstream_rate_limited', 'the provider is rate-limiting; retry later',
        { headers: error.retryAfterMs ? { 'retry-after': String(Math.ceil(error.retryAfterMs / 1000)) } : {} })
    case 'invalid_request':
    case 'context_length_exceeded':
      return new GatewayError(400, 'invalid_request_error', error.kind, `the provider refused the request: ${error.message}`)
    case 'timeout':
      return new GatewayError(504, 'server_error', 'upstream_timeout', 'the provider did not answer in time')
    default:
      return new GatewayError(502, 'server_error', 'upstream_error', `the provider failed: ${error.message}`)
  }
}
