/** The request body as an OpenAI-compatible upstream wants it. */
import { withOneOutputLimit, type MaxTokensParam } from '../output-limit.ts'

export type { MaxTokensParam } from '../output-limit.ts'

/**
 * Puts the token limit under the name the upstream accepts: OpenAI's reasoning models refuse
 * `max_tokens` and want `max_completion_tokens`; some older OpenAI-compatible servers know only
 * `max_tokens`. Without a preference it keeps the name it came under. Either way exactly one
 * limit goes out, the one the ceiling priced (providers/output-limit.ts).
 */
export function renameMaxTokens(
  body: Record<string, unknown>,
  wanted: MaxTokensParam | undefined,
): Record<string, unknown> {
  return withOneOutputLimit(body, wanted)
}

/** A non-streaming call: whatever the caller said about streaming is dropped. */
export function prepareOpenAIBody(
  body: Record<string, unknown>,
  wanted: MaxTokensParam | undefined,
): Record<string, unknown> {
  const { stream: _stream, stream_options: _streamOptions, ...rest } = renameMaxTokens(body, wanted)
  return rest
}

/** A streaming chat call that always asks for the final usage chunk, which billing needs. */
export function prepareOpenAIStreamBody(
  body: Record<string, unknown>,
  wanted: MaxTokensParam | undefined,
): Record<string, unknown> {
  const renamed = renameMaxTokens(body, wanted)
  const options = (renamed.stream_options ?? {}) as Record<string, unknown>
  return { ...renamed, stream: true, stream_options: { ...options, include_usage: true } }
}
