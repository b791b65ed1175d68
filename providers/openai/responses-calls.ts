/**
 * OpenAI's Responses API passed through (docs/clients/responses.md): the body goes to `/responses` with the
 * offering's model id, and the Response object (or its stream events) comes back as it is, with
 * its usage read for billing.
 */
import { upstreamError } from '../classify-error.ts'
import { mapOpenAIUsage } from './map-openai-usage.ts'
import { prepareForOffering } from '../prepare-for-offering.ts'
import { toStreamOutcome } from '../stream-outcome.ts'
import type { Outcome, StreamOutcome, UpstreamRequest, Usage } from '../types.ts'
import { postJson, postStream, type CallContext } from '../upstream-call.ts'
import { cutOff, UpstreamStreamError } from '../upstream-stream-error.ts'

const PATH = '/responses'
const STREAM_FIELDS = ['stream']

/**
 * A Response's usage in the gateway's terms (docs/pricing.md): as chat's, with the cache classes
 * under `input_tokens_details` (cached_tokens, cache_write_tokens), parts of input_tokens.
 */
export function mapResponsesUsage(usage: unknown): Usage | null {
  const u = usage as
    | {
        input_tokens?: unknown
        output_tokens?: unknown
        input_tokens_details?: { cached_tokens?: unknown; cache_write_tokens?: unknown } | null
      }
    | null
    | undefined
  if (typeof u?.input_tokens !== 'number' || typeof u.output_tokens !== 'number') return null
  return mapOpenAIUsage({
    prompt_tokens: u.input_tokens,
    completion_tokens: u.output_tokens,
    prompt_tokens_details: u.input_tokens_details,
  })
}

export async function sendResponses(
  context: CallContext,
  request: UpstreamRequest,
  headers: Record<string, string>,
): Promise<Outcome> {
  const result = await postJson(context, {
    path: PATH,
    headers,
    body: JSON.stringify(prepareForOffering(request.body, request, STREAM_FIELDS)),
    signal: request.signal,
    timeoutMs: request.timeoutMs,
  })
  if (!result.ok) return result
  if (!Array.isArray(result.json.output)) {
    const message = `upstream answered ${result.status} without an "output" array`
    const error = upstreamError('malformed_response', message, { status: result.status })
    return { ok: false, error, latencyMs: result.latencyMs }
  }
  return {
    ok: true,
    status: result.status,
    body: result.json,
    usage: mapResponsesUsage(result.json.usage),
    latencyMs: result.latencyMs,
  }
}

/** The events a Responses stream ends with. */
const ENDS = new Set(['response.completed', 'response.incomplete', 'response.failed'])

/** The stream's events, each as the object it is; usage from response.completed (or incomplete). */
export async function streamResponses(
  context: CallContext,
  request: UpstreamRequest,
  headers: Record<string, string>,
): Promise<StreamOutcome> {
  const result = await postStream(context, {
    path: PATH,
    headers,
    body: JSON.stringify({ ...prepareForOffering(request.body, request), stream: true }),
    signal: request.signal,
    timeoutMs: request.timeoutMs,
  })
  if (!result.ok) return result
  const events = result.events
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
      const object = event as { type?: unknown; response?: { usage?: unknown } }
      if (object.type === 'error') {
        const message = 'upstream reported an error mid-stream'
        throw new UpstreamStreamError(upstreamError('server_error', message, { body: object }))
      }
      usage = mapResponsesUsage(object.response?.usage) ?? usage
      over ||= ENDS.has(object.type as string)
      yield object as Record<string, unknown>
    }
    if (!over) throw cutOff('response.completed')
  }
  return toStreamOutcome(chunks(), result.cancel, () => usage)
}
