import type { Usage } from '../types.ts'

function count(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : null
}

/**
 * OpenAI `usage` → Usage. Chat reports prompt_tokens and completion_tokens; embeddings only
 * prompt_tokens (their output is free). null when usage is missing or not numbers, so the
 * caller can tell "no usage" from "zero tokens". Cache reads and writes
 * (`prompt_tokens_details.cached_tokens` / `cache_write_tokens`, docs/pricing.md) are parts of
 * prompt_tokens, kept when reported (OpenAI, and pools such as vLLM that report them), never
 * more than the prompt.
 */
export function mapOpenAIUsage(usage: unknown): Usage | null {
  if (typeof usage !== 'object' || usage === null) return null
  const {
    prompt_tokens: prompt,
    completion_tokens: completion,
    prompt_tokens_details: details,
  } = usage as Record<string, unknown>
  const input = count(prompt)
  if (input === null) return null
  const output = completion === undefined ? 0 : count(completion)
  if (output === null) return null
  const mapped: Usage = { input_tokens: input, output_tokens: output }
  if (typeof details === 'object' && details !== null) {
    const d = details as Record<string, unknown>
    const cached = Math.min(count(d.cached_tokens) ?? 0, input)
    const written = Math.min(count(d.cache_write_tokens) ?? 0, input - cached)
    if (cached > 0) mapped.cached_input_tokens = cached
    if (written > 0) mapped.cache_write_tokens = written
  }
  return mapped
}
