import type { Usage } from '../types.ts'

function count(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0
}

/**
 * Anthropic usage → Usage. input_tokens excludes prompt-cache reads and writes, which are
 * still input the gateway was asked to send, so they are added back.
 */
export function mapAnthropicUsage(usage: unknown): Usage | null {
  if (typeof usage !== 'object' || usage === null) return null
  const u = usage as Record<string, unknown>
  if (typeof u.input_tokens !== 'number' || typeof u.output_tokens !== 'number') return null
  return {
    input_tokens:
      count(u.input_tokens) +
      count(u.cache_creation_input_tokens) +
      count(u.cache_read_input_tokens),
    output_tokens: count(u.output_tokens),
  }
}
