/** The request body as an OpenAI-compatible upstream wants it. */
import { prepareForOffering, type UpstreamTarget } from '../prepare-for-offering.ts'

/**
 * A non-streaming call: the body for the offering (its model id, the token limit under the name
 * it accepts: prepare-for-offering.ts), and whatever the caller said about streaming dropped.
 */
export function prepareOpenAIBody(
  body: Record<string, unknown>,
  target: UpstreamTarget,
): Record<string, unknown> {
  return prepareForOffering(body, target, STREAM_FIELDS)
}

const STREAM_FIELDS = ['stream', 'stream_options']

/** A streaming chat call that always asks for the final usage chunk, which billing needs. */
export function prepareOpenAIStreamBody(
  body: Record<string, unknown>,
  target: UpstreamTarget,
): Record<string, unknown> {
  const prepared = prepareForOffering(body, target)
  const options = (prepared.stream_options ?? {}) as Record<string, unknown>
  return { ...prepared, stream: true, stream_options: { ...options, include_usage: true } }
}
