/**
 * Anthropic's Messages API behind the OpenAI chat shape: the body is converted on the way out,
 * the answer (or its stream) on the way back. Embeddings are not offered by Anthropic.
 */
import { upstreamError } from '../classify-error.ts'
import { toStreamOutcome } from '../stream-outcome.ts'
import type {
  Outcome,
  ProviderAdapter,
  ProviderOptions,
  StreamOutcome,
  UpstreamRequest,
} from '../types.ts'
import { createCallContext, postJson, postStream } from '../upstream-call.ts'
import { convertAnthropicResponse } from './convert-anthropic-response.ts'
import { convertAnthropicStream, type AnthropicStreamState } from './convert-anthropic-stream.ts'
import { countMessageTokens, sendMessages, streamMessages } from './messages-calls.ts'
import { prepareAnthropicBody } from './prepare-anthropic-body.ts'

// The API version whose request and response shapes the converters implement.
const anthropicVersion = '2023-06-01'

/** Catalogs name the host (https://api.anthropic.com); a trailing /v1 is accepted too. */
function hostBase(baseUrl: string): string {
  return baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '')
}

/** An adapter for kind `anthropic`. */
export function createAnthropicAdapter(options: ProviderOptions): ProviderAdapter {
  const headers: Record<string, string> = { 'anthropic-version': anthropicVersion }
  if (options.apiKey) headers['x-api-key'] = options.apiKey
  const context = createCallContext(options, {
    baseUrls: options.baseUrls.map(hostBase),
    probePath: '/v1/models',
    probeHeaders: headers,
  })
  const { pool } = context

  // The two ways a body is sent, made once rather than on every call.
  const sends = {
    streamed: { stream: true, providerName: options.name },
    unstreamed: { stream: false, providerName: options.name },
  }
  const convert = (request: UpstreamRequest, stream: boolean) =>
    prepareAnthropicBody(
      request.endpoint,
      request.body,
      request,
      stream ? sends.streamed : sends.unstreamed,
    )

  async function send(request: UpstreamRequest): Promise<Outcome> {
    if (request.passThrough === 'messages') return sendMessages(context, request, headers)
    if (request.passThrough === 'count_tokens') return countMessageTokens(context, request, headers)
    const converted = convert(request, false)
    if (!converted.ok) {
      return { ok: false, error: upstreamError('invalid_request', converted.message), latencyMs: 0 }
    }
    const result = await postJson(context, {
      path: '/v1/messages',
      headers,
      body: JSON.stringify(converted.body),
      signal: request.signal,
      timeoutMs: request.timeoutMs,
    })
    if (!result.ok) return result
    const response = convertAnthropicResponse(result.json, Math.floor(Date.now() / 1000))
    if (!response.ok) {
      const error = upstreamError('malformed_response', response.message, { status: result.status })
      return { ok: false, error, latencyMs: result.latencyMs }
    }
    const { body, usage } = response
    return { ok: true, status: result.status, body, usage, latencyMs: result.latencyMs }
  }

  async function stream(request: UpstreamRequest): Promise<StreamOutcome> {
    if (request.passThrough === 'messages') return streamMessages(context, request, headers)
    const converted = convert(request, true)
    if (!converted.ok) {
      return { ok: false, error: upstreamError('invalid_request', converted.message), latencyMs: 0 }
    }
    const result = await postStream(context, {
      path: '/v1/messages',
      headers,
      body: JSON.stringify(converted.body),
      signal: request.signal,
      timeoutMs: request.timeoutMs,
    })
    if (!result.ok) return result
    const state: AnthropicStreamState = { usage: null }
    const chunks = convertAnthropicStream(result.events, state, Math.floor(Date.now() / 1000))
    return toStreamOutcome(chunks, result.cancel, () => state.usage)
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
