/**
 * OpenAI and every OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp): the body passes
 * through, with the offering's model id and token-limit name and, for streams, usage asked for.
 */
import { upstreamError } from '../classify-error.ts'
import { LOAD_REPORT_REQUEST_HEADER } from '../load-report.ts'
import { toStreamOutcome } from '../stream-outcome.ts'
import type {
  Outcome,
  ProviderAdapter,
  ProviderOptions,
  StreamOutcome,
  UpstreamRequest,
  Usage,
} from '../types.ts'
import { createCallContext, postJson, postStream } from '../upstream-call.ts'
import { cutOff, UpstreamStreamError } from '../upstream-stream-error.ts'
import { createFineTuneCalls } from './fine-tune-calls.ts'
import { mapOpenAIUsage } from './map-openai-usage.ts'
import {
  developerAsSystem,
  prepareOpenAIBody,
  prepareOpenAIStreamBody,
} from './prepare-openai-body.ts'
import { sendResponses, streamResponses } from './responses-calls.ts'

const paths = { chat: '/chat/completions', embeddings: '/embeddings' } as const
// What a 2xx body must hold to be the response the endpoint promises.
const requiredList = { chat: 'choices', embeddings: 'data' } as const

/** An adapter for kind `openai`; base URLs end in /v1 (https://api.openai.com/v1). */
export function createOpenAIAdapter(options: ProviderOptions): ProviderAdapter {
  const headers: Record<string, string> = options.apiKey
    ? { authorization: `Bearer ${options.apiKey}` }
    : {}
  // Adaptive: ask vLLM for its load report on every answer (load-report.ts).
  const callHeaders = options.adaptive
    ? { ...headers, [LOAD_REPORT_REQUEST_HEADER]: 'text' }
    : headers
  const context = createCallContext(
    options,
    { baseUrls: options.baseUrls, probePath: '/models', probeHeaders: headers },
    createFineTuneCalls({ headers, timeoutMs: options.timeoutMs, apiKey: options.apiKey }),
  )
  const { pool } = context
  // The flex lane (docs/pricing.md): OpenAI's cheaper, slower tier, asked for on every chat call
  // and every Responses call passed through, which it bills at the flex lane's prices.
  const withTier = (body: Record<string, unknown>) =>
    options.serviceTier ? { ...body, service_tier: options.serviceTier } : body
  // A chat body as this server takes it: the flex tier asked for, developer messages as system
  // ones for a server that is not OpenAI's own (ProviderOptions.developerAsSystem).
  const roles = options.developerAsSystem
    ? developerAsSystem
    : (body: Record<string, unknown>) => body
  const forServer = (body: Record<string, unknown>, endpoint: UpstreamRequest['endpoint']) =>
    endpoint === 'chat' ? withTier(roles(body)) : body
  const tiered = (request: UpstreamRequest): UpstreamRequest =>
    options.serviceTier ? { ...request, body: withTier(request.body) } : request

  async function send(request: UpstreamRequest): Promise<Outcome> {
    if (request.passThrough === 'responses')
      return sendResponses(context, tiered(request), callHeaders)
    const result = await postJson(context, {
      path: paths[request.endpoint],
      headers: callHeaders,
      body: JSON.stringify(forServer(prepareOpenAIBody(request.body, request), request.endpoint)),
      signal: request.signal,
      timeoutMs: request.timeoutMs,
      fineTune: request.fineTune,
    })
    if (!result.ok) return result
    const list = requiredList[request.endpoint]
    if (!Array.isArray(result.json[list])) {
      const message = `upstream answered ${result.status} without a "${list}" array`
      const error = upstreamError('malformed_response', message, { status: result.status })
      return { ok: false, error, latencyMs: result.latencyMs }
    }
    return {
      ok: true,
      status: result.status,
      body: result.json,
      text: result.text,
      usage: mapOpenAIUsage(result.json.usage),
      latencyMs: result.latencyMs,
    }
  }

  async function stream(request: UpstreamRequest): Promise<StreamOutcome> {
    if (request.passThrough === 'responses')
      return streamResponses(context, tiered(request), headers)
    if (request.endpoint !== 'chat') {
      const error = upstreamError('invalid_request', 'only chat completions can stream')
      return { ok: false, error, latencyMs: 0 }
    }
    const result = await postStream(context, {
      path: paths.chat,
      headers,
      body: JSON.stringify(forServer(prepareOpenAIStreamBody(request.body, request), 'chat')),
      signal: request.signal,
      timeoutMs: request.timeoutMs,
      fineTune: request.fineTune,
    })
    if (!result.ok) return result
    const events = result.events
    let usage: Usage | null = null

    const choices = choiceCount(request.body)
    async function* chunks(): AsyncGenerator<Record<string, unknown>> {
      // Over at [DONE], or once every choice has finished (its usage chunk may be all that is
      // lost): with n > 1 the first choice to finish does not end the answer.
      let over = false
      const finished = new Set<unknown>()
      for await (const { data } of events) {
        if (data === '[DONE]') {
          over = true
          continue
        }
        let chunk: unknown
        try {
          chunk = JSON.parse(data)
        } catch {
          chunk = null
        }
        if (typeof chunk !== 'object' || chunk === null || Array.isArray(chunk)) {
          const message = 'upstream sent a stream event that is not a JSON object'
          throw new UpstreamStreamError(upstreamError('malformed_response', message))
        }
        const object = chunk as Record<string, unknown>
        // OpenAI reports a failure after the stream opened as an event with an error object.
        if (object.error !== undefined && object.choices === undefined) {
          const message = 'upstream reported an error mid-stream'
          throw new UpstreamStreamError(upstreamError('server_error', message, { body: object }))
        }
        usage = mapOpenAIUsage(object.usage) ?? usage
        over ||= finishes(object, finished) >= choices
        yield object
      }
      if (!over) throw cutOff('[DONE]')
    }
    return toStreamOutcome(chunks(), result.cancel, () => usage)
  }

  return {
    name: options.name,
    send,
    stream,
    unhealthyReplicas: () => pool.unhealthy(),
    workingLimit: () => pool.workingLimit(),
    workingPoints: () => pool.workingPoints(),
    unreachable: () => pool.unreachable(),
    close: () => pool.close(),
  }
}

/** Adds the choices a chat chunk ends to `finished` (their indexes); how many have ended. */
function finishes(chunk: Record<string, unknown>, finished: Set<unknown>): number {
  if (Array.isArray(chunk.choices))
    for (const choice of chunk.choices as { index?: unknown; finish_reason?: unknown }[])
      if (choice?.finish_reason != null) finished.add(choice.index ?? 0)
  return finished.size
}

/** How many choices a chat body asks for (`n`, 1 when absent). */
const choiceCount = (body: Record<string, unknown>) =>
  typeof body.n === 'number' && Number.isInteger(body.n) && body.n > 1 ? body.n : 1
