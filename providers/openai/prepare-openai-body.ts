/** The request body as an OpenAI-compatible upstream wants it. */

export type MaxTokensParam = 'max_tokens' | 'max_completion_tokens'

/**
 * Moves the token limit to the name the upstream accepts: OpenAI's reasoning models refuse
 * `max_tokens` and want `max_completion_tokens`; some older OpenAI-compatible servers know only
 * `max_tokens`. Without a preference the body goes as it came.
 */
export function renameMaxTokens(
  body: Record<string, unknown>,
  wanted: MaxTokensParam | undefined,
): Record<string, unknown> {
  if (wanted === undefined) return body
  const other: MaxTokensParam = wanted === 'max_tokens' ? 'max_completion_tokens' : 'max_tokens'
  if (body[other] === undefined) return body
  const { [other]: limit, ...rest } = body
  return rest[wanted] === undefined ? { ...rest, [wanted]: limit } : rest
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
