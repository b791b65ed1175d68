import type { Usage } from '../types.ts'

function count(value: unknown): number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 ? value : 0
}

/**
 * Anthropic usage → Usage (docs/pricing.md). Anthropic's input_tokens is the uncached part; cache
 * reads (`cache_read_input_tokens`) and writes (`cache_creation_input_tokens`) come on top, so
 * the prompt is their sum, each class kept apart to be priced at its own rate. Writes split by
 * TTL when `cache_creation` says so; without the split they are all 5-minute writes, and so is
 * what a split leaves out of the total.
 */
export function mapAnthropicUsage(usage: unknown): Usage | null {
  if (typeof usage !== 'object' || usage === null) return null
  const u = usage as Record<string, unknown>
  if (typeof u.input_tokens !== 'number' || typeof u.output_tokens !== 'number') return null
  const read = count(u.cache_read_input_tokens)
  let written5m = count(u.cache_creation_input_tokens)
  let written1h = 0
  const split = u.cache_creation as Record<string, unknown> | null | undefined
  // The split only when it has one: an object without either figure leaves the total at 5 minutes.
  // Written tokens the split leaves out of the total are 5-minute writes, the default TTL: a split
  // that does not add up loses none of them.
  if (
    typeof split === 'object' &&
    split !== null &&
    (typeof split.ephemeral_5m_input_tokens === 'number' ||
      typeof split.ephemeral_1h_input_tokens === 'number')
  ) {
    written1h = count(split.ephemeral_1h_input_tokens)
    written5m = Math.max(count(split.ephemeral_5m_input_tokens), written5m - written1h)
  }
  const mapped: Usage = {
    input_tokens: count(u.input_tokens) + read + written5m + written1h,
    output_tokens: count(u.output_tokens),
  }
  if (typeof u.cache_read_input_tokens === 'number') mapped.cached_input_tokens = read
  if (written5m > 0) mapped.cache_write_tokens = written5m
  if (written1h > 0) mapped.cache_write_1h_tokens = written1h
  return mapped
}

/**
 * message_start's usage updated by a message_delta's. The delta's figures are cumulative, and
 * every one but output_tokens may be null: not reported there, so the start's figure stands
 * (Anthropic's own SDK reads them so); a null taken as a figure would drop the prompt's classes.
 */
export function withDeltaUsage(
  raw: Record<string, unknown>,
  delta: Record<string, unknown> | null | undefined,
): Record<string, unknown> {
  const merged = { ...raw }
  for (const [name, value] of Object.entries(delta ?? {}))
    if (value !== null && value !== undefined) merged[name] = value
  return merged
}
