/** The request body as an OpenAI-compatible upstream wants it. */
import { prepareForOffering, type UpstreamTarget } from '../prepare-for-offering.ts'

/**
 * A non-streaming call: the body for the offering (its model id, the token limit under the name
 * it accepts: prepare-for-offering.ts), and whatever the caller said about streaming dropped.
 */
export function prepareOpenAIBody(
  body: Record<string, unknown>,
  target: UpstreamTarget,
): Record<string, unknown> {
  return withoutCacheControl(prepareForOffering(body, target, STREAM_FIELDS))
}

const STREAM_FIELDS = ['stream', 'stream_options']

/** A streaming chat call that always asks for the final usage chunk, which billing needs. */
export function prepareOpenAIStreamBody(
  body: Record<string, unknown>,
  target: UpstreamTarget,
): Record<string, unknown> {
  const prepared = withoutCacheControl(prepareForOffering(body, target))
  const options = (prepared.stream_options ?? {}) as Record<string, unknown>
  return { ...prepared, stream: true, stream_options: { ...options, include_usage: true } }
}

const hasCache = (item: unknown) =>
  typeof item === 'object' && item !== null && 'cache_control' in item

function dropCache<T>(item: T): T {
  if (!hasCache(item)) return item
  const { cache_control: _dropped, ...rest } = item as Record<string, unknown>
  return rest as T
}

/**
 * `cache_control` on content parts and tools is Anthropic's (docs/pricing.md): an OpenAI-compatible
 * upstream is sent the body without it (OpenAI caches by itself and would refuse the field).
 * Copies only what holds one, so a body without any is passed on as it is.
 */
export function withoutCacheControl(body: Record<string, unknown>): Record<string, unknown> {
  let out = body
  const messages = body.messages
  if (Array.isArray(messages)) {
    let copied: unknown[] | null = null
    messages.forEach((message, m) => {
      const content = (message as { content?: unknown } | null)?.content
      if (!Array.isArray(content) || !content.some(hasCache)) return
      copied ??= [...messages]
      copied[m] = { ...(message as object), content: content.map(dropCache) }
    })
    if (copied) out = { ...out, messages: copied }
  }
  if (Array.isArray(body.tools) && body.tools.some(hasCache))
    out = { ...out, tools: body.tools.map(dropCache) }
  return out
}

const isDeveloper = (message: unknown) =>
  (message as { role?: unknown } | null)?.role === 'developer'

/**
 * A chat body whose `developer` messages are `system` ones (ProviderOptions.developerAsSystem):
 * OpenAI reads the two alike. Copies only a body that holds one.
 */
export function developerAsSystem(body: Record<string, unknown>): Record<string, unknown> {
  const messages = body.messages
  if (!Array.isArray(messages) || !messages.some(isDeveloper)) return body
  const renamed = messages.map((message) =>
    isDeveloper(message) ? { ...(message as object), role: 'system' } : message,
  )
  return { ...body, messages: renamed }
}
