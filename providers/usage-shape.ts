import type { Usage } from './types.ts'

/**
 * A translated answer's usage in OpenAI's chat shape, cache classes in `prompt_tokens_details`
 * (docs/pricing.md): always there, zeros included, as OpenAI's own answers carry it.
 */
export function openAIUsageShape(usage: Usage): Record<string, unknown> {
  return {
    prompt_tokens: usage.input_tokens,
    completion_tokens: usage.output_tokens,
    total_tokens: usage.input_tokens + usage.output_tokens,
    prompt_tokens_details: {
      cached_tokens: usage.cached_input_tokens ?? 0,
      cache_write_tokens: (usage.cache_write_tokens ?? 0) + (usage.cache_write_1h_tokens ?? 0),
    },
  }
}
