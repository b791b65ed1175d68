/**
 * chat.completion.chunk objects → Anthropic's stream events (docs/clients/anthropic-sdk.md), in Anthropic's order:
 * message_start, then per content block content_block_start, content_block_delta…,
 * content_block_stop, then message_delta (stop_reason, usage) and message_stop. Chat streams
 * report usage after their finish_reason, so message_delta waits for the end of the stream.
 */
import type { Usage } from '../../../providers/types.ts'
import type { StreamRender } from '../live.ts'
import { messageIdOf, stopReasonOf } from '../../../providers/anthropic/convert-chat-to-message.ts'
import { streamedToolUseIds } from '../../../providers/anthropic/map-tool-use-ids.ts'

const event = (type: string, data: Record<string, unknown>) =>
  `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`

interface ToolDelta {
  index?: number
  id?: string
  function?: { name?: string; arguments?: string }
}

/** One renderer per stream; `model` is the name the caller asked for. */
export function anthropicStreamRender(model: string): StreamRender {
  let started = false
  let stopReason = 'end_turn'
  let calledTools = false
  // The open content block: its Anthropic index and what it is (text, or a chat tool call's index).
  let open: { index: number; kind: 'text' | number } | null = null
  let nextIndex = 0
  // Another model's call ids (`functions.get_weather:0`) named as a whole answer's are.
  const toolId = streamedToolUseIds()

  const start = (id: unknown) => {
    started = true
    const message = {
      id: messageIdOf(id),
      type: 'message',
      role: 'assistant',
      model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0 },
    }
    return event('message_start', { message })
  }
  const close = () => {
    if (!open) return ''
    const text = event('content_block_stop', { index: open.index })
    open = null
    return text
  }
  const openBlock = (kind: 'text' | number, block: Record<string, unknown>) => {
    const text = close()
    open = { index: nextIndex++, kind }
    return text + event('content_block_start', { index: open.index, content_block: block })
  }

  return {
    chunk(value) {
      let out = started ? '' : start(value.id)
      const choice = (value.choices as Record<string, unknown>[] | undefined)?.[0]
      if (!choice) return out
      const delta = (choice.delta ?? {}) as { content?: unknown; tool_calls?: ToolDelta[] }
      if (typeof delta.content === 'string' && delta.content !== '') {
        if (open?.kind !== 'text') out += openBlock('text', { type: 'text', text: '' })
        out += event('content_block_delta', {
          index: open!.index,
          delta: { type: 'text_delta', text: delta.content },
        })
      }
      for (const call of delta.tool_calls ?? []) {
        calledTools = true
        const callIndex = call.index ?? 0
        if (open?.kind !== callIndex) {
          out += openBlock(callIndex, {
            type: 'tool_use',
            id: toolId(call.id ?? `toolu_${callIndex}`),
            name: call.function?.name ?? '',
            input: {},
          })
        }
        if (call.function?.arguments)
          out += event('content_block_delta', {
            index: open!.index,
            delta: { type: 'input_json_delta', partial_json: call.function.arguments },
          })
      }
      if (choice.finish_reason) stopReason = stopReasonOf(choice.finish_reason, calledTools)
      return out
    },
    end(usage: Usage | null) {
      const head = started ? '' : start(null)
      return (
        head +
        close() +
        event('message_delta', {
          delta: { stop_reason: stopReason, stop_sequence: null },
          usage: messageUsage(usage),
        }) +
        event('message_stop', {})
      )
    },
    broken: () =>
      event('error', {
        error: { type: 'api_error', message: 'the upstream stream broke off' },
      }),
  }
}

/**
 * The stream's usage as Anthropic counts it, as a whole answer's is (anthropicUsage): input_tokens
 * the uncached part, the cache's reads and writes beside it; the gateway's Usage counts them in.
 */
function messageUsage(usage: Usage | null) {
  const read = usage?.cached_input_tokens ?? 0
  const written = (usage?.cache_write_tokens ?? 0) + (usage?.cache_write_1h_tokens ?? 0)
  return {
    input_tokens: Math.max(0, (usage?.input_tokens ?? 0) - read - written),
    output_tokens: usage?.output_tokens ?? 0,
    cache_creation_input_tokens: written,
    cache_read_input_tokens: read,
  }
}
