/** An Anthropic `message` → an OpenAI `chat.completion`. */
import type { Usage } from '../types.ts'
import { openAIUsageShape } from '../usage-shape.ts'
import { mapAnthropicStopReason } from './map-anthropic-stop-reason.ts'
import { mapAnthropicUsage } from './map-anthropic-usage.ts'

export type AnthropicResponseConversion =
  { ok: true; body: Record<string, unknown>; usage: Usage | null } | { ok: false; message: string }

/** `created` is passed in (Unix seconds): Anthropic messages carry no timestamp. */
export function convertAnthropicResponse(
  message: Record<string, unknown>,
  created: number,
): AnthropicResponseConversion {
  if (!Array.isArray(message.content)) {
    return { ok: false, message: 'the Anthropic answer has no content array' }
  }
  let text = ''
  let hasText = false
  const toolCalls: Record<string, unknown>[] = []
  for (const block of message.content as Record<string, unknown>[]) {
    if (block?.type === 'text' && typeof block.text === 'string') {
      text += block.text
      hasText = true
    } else if (block?.type === 'tool_use') {
      toolCalls.push({
        id: block.id,
        type: 'function',
        function: { name: block.name, arguments: JSON.stringify(block.input ?? {}) },
      })
    }
    // thinking and server-tool blocks have no chat.completion counterpart.
  }
  const usage = mapAnthropicUsage(message.usage)
  const assistant: Record<string, unknown> = {
    role: 'assistant',
    // OpenAI sends null content for a turn that is only tool calls.
    content: hasText || toolCalls.length === 0 ? text : null,
    refusal: null,
  }
  if (toolCalls.length > 0) assistant.tool_calls = toolCalls
  const body: Record<string, unknown> = {
    id: message.id,
    object: 'chat.completion',
    created,
    model: message.model,
    choices: [
      {
        index: 0,
        message: assistant,
        logprobs: null,
        finish_reason: mapAnthropicStopReason(message.stop_reason).unified,
      },
    ],
  }
  if (usage) {
    body.usage = openAIUsageShape(usage)
  }
  return { ok: true, body, usage }
}
