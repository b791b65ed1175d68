/**
 * The output-token limit of a chat body, read one way for the cost ceiling and for every
 * adapter, so that what is sent upstream is what was priced (docs/money-and-limits.md).
 *
 * OpenAI's API takes two names for it. When a body carries both and they differ,
 * `max_completion_tokens` wins: OpenAI deprecated `max_tokens` in its favour ("max_tokens is now
 * deprecated in favor of max_completion_tokens", chat API reference), so it is the one a user of
 * OpenAI's API means, and the only one its reasoning models accept. The other is dropped before
 * the body goes out: an upstream never sees two limits to choose between. Both are still
 * range-checked at validation (src/ingest/validate-body.ts), as each would be by OpenAI.
 */

import type { MaxTokensParam, ModelLimits } from './types.ts'

export type { MaxTokensParam }

const count = (value: unknown): number | undefined =>
  typeof value === 'number' ? value : undefined

/** The per-choice output limit the body asks for, or undefined when it sets none. */
export function requestedOutputTokens(body: Record<string, unknown>): number | undefined {
  return count(body.max_completion_tokens) ?? count(body.max_tokens)
}

/**
 * The body with its limit under exactly one name: `name` when given (the upstream's
 * preference), else the name the winning value came under. Without a limit, the body as it came.
 */
export function withOneOutputLimit(
  body: Record<string, unknown>,
  name?: MaxTokensParam,
): Record<string, unknown> {
  const limit = requestedOutputTokens(body)
  if (limit === undefined) return body
  const target: MaxTokensParam =
    name ??
    (count(body.max_completion_tokens) !== undefined ? 'max_completion_tokens' : 'max_tokens')
  const other: MaxTokensParam = target === 'max_tokens' ? 'max_completion_tokens' : 'max_tokens'
  if (body[other] === undefined && body[target] === limit) return body
  const { [other]: _dropped, ...rest } = body
  return { ...rest, [target]: limit }
}

/** Anthropic's tool-use system prompt is 313–346 tokens (Claude 4 models); OpenAI's wrapper less. */
export const TOOLS_PROMPT = 1_000

/** Sent by an upstream that requires a limit when neither the body nor the caller names one. */
export const UNSET_LIMIT_FALLBACK = 4096

/**
 * The limit an upstream that requires one (Anthropic) is sent for a body that sets none: the
 * model's own, as OpenAI's API lets such a request run to it and the cost ceiling counts it,
 * lowered where the prompt might fill the context window, since Anthropic refuses a request whose
 * input and max_tokens together pass it. The prompt is counted as the ceiling counts it (a byte a
 * token at most, plus the tool-use prompt). Never below 4,096 (or the model's limit, if lower),
 * what was sent before the model's limit was known.
 */
export function unsetOutputLimit(
  promptBytes: number,
  tools: boolean,
  limits: ModelLimits | undefined,
): number {
  if (!limits) return UNSET_LIMIT_FALLBACK
  const room = limits.contextTokens - promptBytes - (tools ? TOOLS_PROMPT : 0)
  const floor = Math.min(UNSET_LIMIT_FALLBACK, limits.outputTokens)
  return Math.max(floor, Math.min(limits.outputTokens, room))
}
