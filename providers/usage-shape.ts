import type { Usage } from './types.ts'

/** The usage in OpenAI's chat shape, cache classes in `prompt_tokens_details` (docs/pricing.md). */
export function openAIUsageShape(usage: Usage): Record<string, unknown> {
  const shaped: Record<string, unknown> = {
    prompt_tokens: usage.input_tokens,
    completion_tokens: usage.output_tokens,
    total_tokens: usage.input_tokens + usage.output_tokens,
  }
  const written = (usage.cache_write_tokens ?? 0) + (usage.cache_write_1h_tokens ?? 0)
  if (usage.cached_input_tokens !== undefined || written > 0)
    shaped.prompt_tokens_details = {
      cached_tokens: usage.cached_input_tokens ?? 0,
      cache_write_tokens: written,
    }
  return shaped
}
