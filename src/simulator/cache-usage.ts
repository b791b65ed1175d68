/**
 * Prompt-cache usage on request (docs/pricing.md): a `[sim:cache read=N write=N write1h=N]` marker
 * anywhere in a prompt makes the simulator report N tokens of that prompt as read from the
 * cache, written to it for 5 minutes, or for an hour, in each provider's shape, so a test knows
 * each class's count in advance. `nosplit` leaves Anthropic's 5m/1h split out. The classes never
 * claim more than the prompt: they are taken from its honest count, reads first.
 */
import type { MessageText } from './reply.ts'

export interface CacheUsage {
  read: number
  write: number
  write1h: number
  /** Anthropic: report `cache_creation` with its 5m/1h split. */
  split: boolean
}

const MARKER = /\[sim:cache((?:\s+[a-z0-9]+(?:=\d+)?)*)\]/

export function cacheUsageOf(texts: MessageText[], promptTokens: number): CacheUsage | null {
  let found: RegExpExecArray | null = null
  for (const message of texts) found ??= MARKER.exec(message.text)
  if (!found) return null
  const fields = new Map<string, number>()
  for (const item of found[1].trim().split(/\s+/).filter(Boolean)) {
    const [name, value] = item.split('=')
    fields.set(name, value === undefined ? 1 : Number(value))
  }
  let left = promptTokens
  const take = (name: string) => {
    const taken = Math.min(fields.get(name) ?? 0, left)
    left -= taken
    return taken
  }
  return {
    read: take('read'),
    write: take('write'),
    write1h: take('write1h'),
    split: !fields.has('nosplit'),
  }
}

/** OpenAI's shape: parts of prompt_tokens (a 1-hour write is a write to OpenAI). */
export function openAICacheDetails(cache: CacheUsage) {
  return { cached_tokens: cache.read, cache_write_tokens: cache.write + cache.write1h }
}

/** Anthropic's shape: `input_tokens` is what is left uncached, the cache fields on top. */
export function anthropicCacheUsage(promptTokens: number, cache: CacheUsage | null) {
  if (!cache) return { input_tokens: promptTokens }
  const written = cache.write + cache.write1h
  return {
    input_tokens: promptTokens - cache.read - written,
    cache_read_input_tokens: cache.read,
    cache_creation_input_tokens: written,
    ...(cache.split
      ? {
          cache_creation: {
            ephemeral_5m_input_tokens: cache.write,
            ephemeral_1h_input_tokens: cache.write1h,
          },
        }
      : {}),
  }
}
