/**
 * Anthropic's Messages API passed through (docs/clients/anthropic-sdk.md): a Messages request from the gateway's
 * Anthropic surface goes to `/v1/messages` with the offering's model id, and the message (or its
 * stream events) comes back as Anthropic sent it, with its usage read for billing.
 */
import { upstreamError } from '../classify-error.ts'
import { prepareForOffering } from '../prepare-for-offering.ts'
import { toStreamOutcome } from '../stream-outcome.ts'
import type { Outcome, StreamOutcome, UpstreamRequest, Usage } from '../types.ts'
import { postJson, postStream, type CallContext } from '../upstream-call.ts'
import { cutOff, UpstreamStreamError } from '../upstream-stream-error.ts'
import { mapAnthropicUsage, withDeltaUsage } from './map-anthropic-usage.ts'

const PATH = '/v1/messages'

/** The adapter's headers, with the betas the caller asked for when it asked for any. */
const withBetas = (headers: Record<string, string>, request: UpstreamRequest) =>
  request.anthropicBeta === undefined
    ? headers
    : { ...headers, 'anthropic-beta': request.anthropicBeta }

/**
 * Anthropic's count of a Messages request's prompt (`POST /v1/messages/count_tokens`): the body
 * as it came, less what the endpoint does not take, with the offering's model id.
 */
export async function countMessageTokens(
  context: CallContext,
  request: UpstreamRequest,
  headers: Record<string, string>,
): Promise<Outcome> {
  const { max_tokens: _max, stream: _stream, ...body } = prepareForOffering(request.body, request)
  const result = await postJson(context, {
    path: `${PATH}/count_tokens`,
    headers: withBetas(headers, request),
    body: JSON.stringify(body),
    signal: request.signal,
    timeoutMs: request.timeoutMs,
  })
  if (!result.ok) return result
  if (typeof result.json.input_tokens !== 'number') {
    const message = `upstream answered ${result.status} without "input_tokens"`
    const error = upstreamError('malformed_response', message, { status: result.status })
    return { ok: false, error, latencyMs: result.latencyMs }
  }
  return {
    ok: true,
    status: result.status,
    body: result.json,
    usage: null,
    latencyMs: result.latencyMs,
  }
}

export async function sendMessages(
  context: CallContext,
  request: UpstreamRequest,
  headers: Record<string, string>,
): Promise<Outcome> {
  const result = await postJson(context, {
    path: PATH,
    headers: withBetas(headers, request),
    body: JSON.stringify(prepareForOffering(request.body, request, ['stream'])),
    signal: request.signal,
    timeoutMs: request.timeoutMs,
  })
  if (!result.ok) return result
  if (!Array.isArray(result.json.content)) {
    const message = `upstream answered ${result.status} without a "content" array`
    const error = upstreamError('malformed_response', message, { status: result.status })
    return { ok: false, error, latencyMs: result.latencyMs }
  }
  const usage = mapAnthropicUsage(result.json.usage)
  return { ok: true, status: result.status, body: result.json, usage, latencyMs: result.latencyMs }
}

/** Each event as the object it is; usage is message_start's, updated by message_delta's. */
export async function streamMessages(
  context: CallContext,
  request: UpstreamRequest,
  headers: Record<string, string>,
): Promise<StreamOutcome> {
  const result = await postStream(context, {
    path: PATH,
    headers: withBetas(headers, request),
    body: JSON.stringify({ ...prepareForOffering(request.body, request), stream: true }),
    signal: request.signal,
    timeoutMs: request.timeoutMs,
  })
  if (!result.ok) return result
  const events = result.events
  let raw: Record<string, unknown> = {}
  let usage: Usage | null = null
  async function* chunks(): AsyncGenerator<Record<string, unknown>> {
    let over = false
    for await (const { data } of events) {
      let event: unknown
      try {
        event = JSON.parse(data)
      } catch {
        event = null
      }
      if (typeof event !== 'object' || event === null || Array.isArray(event)) {
        const message = 'upstream sent a stream event that is not a JSON object'
        throw new UpstreamStreamError(upstreamError('malformed_response', message))
      }
      const object = event as {
        type?: unknown
        message?: { usage?: Record<string, unknown> }
        usage?: Record<string, unknown>
      }
      if (object.type === 'error') {
        const message = 'upstream reported an error mid-stream'
        throw new UpstreamStreamError(upstreamError('server_error', message, { body: object }))
      }
      if (object.type === 'message_start') raw = { ...(object.message?.usage ?? {}) }
      if (object.type === 'message_delta') raw = withDeltaUsage(raw, object.usage)
      usage = mapAnthropicUsage(raw) ?? usage
      over ||= object.type === 'message_stop'
      yield object as Record<string, unknown>
    }
    if (!over) throw cutOff('message_stop')
  }
  return toStreamOutcome(chunks(), result.cancel, () => usage)
}
