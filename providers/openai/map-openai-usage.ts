import type { Usage } from '../types.ts'

function count(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : null
}

/**
 * OpenAI `usage` → Usage. Chat reports prompt_tokens and completion_tokens; embeddings only
 * prompt_tokens (their output is free). null when usage is missing or not numbers, so the
 * caller can tell "no usage" from "zero tokens".
 */
export function mapOpenAIUsage(usage: unknown): Usage | null {
  if (typeof usage !== 'object' || usage === null) return null
  const { prompt_tokens: prompt, completion_tokens: completion } = usage as Record<string, unknown>
  const input = count(prompt)
  if (input === null) return null
  const output = completion === undefined ? 0 : count(completion)
  if (output === null) return null
  return { input_tokens: input, output_tokens: output }
}
