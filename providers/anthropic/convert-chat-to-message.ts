/**
 * A chat.completion → an Anthropic `message` (docs/clients/anthropic-sdk.md), the inverse of
 * providers/anthropic/convert-anthropic-response.ts: text and tool calls as content blocks (their
 * ids within Anthropic's pattern, map-tool-use-ids.ts), finish_reason as stop_reason, usage as
 * Anthropic counts it.
 */

import { mapToolUseIds } from './map-tool-use-ids.ts'

/**
 * OpenAI finish_reason → Anthropic stop_reason (map-anthropic-stop-reason.ts, read backwards).
 * `calledTools`: the answer holds tool calls. OpenAI ends a call to a function named in
 * tool_choice with `stop`, where Anthropic's clients read `tool_use` to run the tool.
 */
export function stopReasonOf(finishReason: unknown, calledTools: boolean): string {
  if (finishReason === 'stop' && calledTools) return 'tool_use'
  switch (finishReason) {
    case 'length':
      return 'max_tokens'
    case 'tool_calls':
    case 'function_call':
      return 'tool_use'
    case 'content_filter':
      return 'refusal'
    default:
      return 'end_turn'
  }
}

/** An id Anthropic's clients recognise: an Anthropic upstream's own, else prefixed. */
export function messageIdOf(id: unknown): string {
  const text = typeof id === 'string' && id !== '' ? id : crypto.randomUUID().replaceAll('-', '')
  return text.startsWith('msg_') ? text : `msg_${text}`
}

/**
 * Anthropic's usage object from chat usage. OpenAI-shaped prompt_tokens count the cache classes
 * (docs/pricing.md); Anthropic's input_tokens is the uncached part, the cache fields on top.
 */
export function anthropicUsage(usage: unknown) {
  const u = (usage ?? {}) as {
    prompt_tokens?: unknown
    completion_tokens?: unknown
    prompt_tokens_details?: { cached_tokens?: unknown; cache_write_tokens?: unknown } | null
  }
  const count = (value: unknown) => (typeof value === 'number' && value > 0 ? value : 0)
  const cached = count(u.prompt_tokens_details?.cached_tokens)
  const written = count(u.prompt_tokens_details?.cache_write_tokens)
  return {
    input_tokens: Math.max(0, count(u.prompt_tokens) - cached - written),
    output_tokens: count(u.completion_tokens),
    cache_creation_input_tokens: written,
    cache_read_input_tokens: cached,
  }
}

function parseArguments(text: unknown): unknown {
  try {
    return JSON.parse(typeof text === 'string' && text !== '' ? text : '{}')
  } catch {
    // An argument string that is not JSON is kept, so the caller can see what the model said.
    return { arguments: text }
  }
}

export function convertChatToMessage(completion: Record<string, unknown>, model?: string) {
  const choice = ((completion.choices as unknown[] | undefined)?.[0] ?? {}) as {
    message?: { content?: unknown; tool_calls?: unknown[] }
    finish_reason?: unknown
  }
  const content: Record<string, unknown>[] = []
  const text = choice.message?.content
  if (typeof text === 'string' && text !== '') content.push({ type: 'text', text })
  type Call = { id?: unknown; function?: { name?: unknown; arguments?: unknown } }
  const toolCalls = (choice.message?.tool_calls ?? []) as Call[]
  // Another model's ids (`functions.get_weather:0`) made ones Anthropic takes, as a request's are.
  const toolId = mapToolUseIds([choice.message])
  for (const [index, call] of toolCalls.entries()) {
    content.push({
      type: 'tool_use',
      id: toolId(call.id) ?? `toolu_${index}`,
      name: call.function?.name,
      input: parseArguments(call.function?.arguments),
    })
  }
  return {
    id: messageIdOf(completion.id),
    type: 'message',
    role: 'assistant',
    model: model ?? completion.model,
    content,
    stop_reason: stopReasonOf(choice.finish_reason, toolCalls.length > 0),
    stop_sequence: null,
    usage: anthropicUsage(completion.usage),
  }
}
