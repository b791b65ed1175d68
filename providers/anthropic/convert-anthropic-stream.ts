/**
 * Anthropic stream events → OpenAI chat.completion.chunk objects.
 *
 * The first block → the role chunk (content "" before text, null before a tool call); text
 * deltas → content deltas; tool_use blocks and their JSON
 * deltas → tool_calls deltas; message_delta → the finish_reason chunk; message_stop → a usage
 * chunk (choices: []) like OpenAI's include_usage one. Usage is message_start's, updated by
 * message_delta's cumulative counts.
 */
import { upstreamError } from '../classify-error.ts'
import type { SseEvent } from '../read-sse-events.ts'
import type { Usage } from '../types.ts'
import { openAIUsageShape } from '../usage-shape.ts'
import { cutOff, UpstreamStreamError } from '../upstream-stream-error.ts'
import { mapAnthropicStopReason } from './map-anthropic-stop-reason.ts'
import { mapAnthropicUsage, withDeltaUsage } from './map-anthropic-usage.ts'

export interface AnthropicStreamState {
  /** Filled in as events arrive; final after the generator ends. */
  usage: Usage | null
}

/** The fields of Anthropic's stream events that the translation reads; all optional. */
interface Data {
  type?: string
  index?: number
  message?: { id?: string; model?: string; usage?: Record<string, unknown> }
  content_block?: {
    type?: string
    id?: string
    name?: string
    text?: string
    input?: Record<string, unknown>
  }
  delta?: { type?: string; text?: string; partial_json?: string; stop_reason?: string | null }
  usage?: Record<string, unknown>
  error?: { type?: string; message?: string }
}

function parse(event: SseEvent): Data {
  try {
    const data: unknown = JSON.parse(event.data)
    if (typeof data === 'object' && data !== null && !Array.isArray(data)) return data as Data
  } catch {
    // fall through to the malformed error below
  }
  const message = 'upstream sent a stream event that is not a JSON object'
  throw new UpstreamStreamError(upstreamError('malformed_response', message))
}

function streamFailure(data: Data): UpstreamStreamError {
  const type = String(data.error?.type ?? '')
  const message = `upstream failed mid-stream: ${type} ${String(data.error?.message ?? '')}`.trim()
  const kind = type === 'rate_limit_error' ? 'rate_limited' : 'server_error'
  return new UpstreamStreamError(upstreamError(kind, message, { body: data }))
}

export async function* convertAnthropicStream(
  events: AsyncIterable<SseEvent>,
  state: AnthropicStreamState,
  created: number,
): AsyncGenerator<Record<string, unknown>> {
  let id = ''
  let model = ''
  let rawUsage: Record<string, unknown> = {}
  const toolIndexOfBlock = new Map<number, number>()
  /** Tool blocks whose JSON has had a piece that is not blank. */
  const withArguments = new Set<number>()
  /** Tool blocks whose start carried a non-empty input, as JSON text. */
  const startInputs = new Map<number, string>()
  const chunk = (delta: Record<string, unknown>, finishReason: string | null = null) => ({
    id,
    object: 'chat.completion.chunk',
    created,
    model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
  })

  let over = false
  // The first delta carries the role, as OpenAI's does: with content "" before text, null before a
  // tool call (a tool-only answer's message content is null, not ""). Sent with the first block.
  let roleSent = false
  const opening = (delta: Record<string, unknown>) => {
    if (roleSent) return delta
    roleSent = true
    return { role: 'assistant', ...delta }
  }
  for await (const event of events) {
    const data = parse(event)
    switch (data.type) {
      case 'message_start':
        id = String(data.message?.id ?? '')
        model = String(data.message?.model ?? '')
        rawUsage = { ...(data.message?.usage ?? {}) }
        state.usage = mapAnthropicUsage(rawUsage)
        break
      case 'content_block_start': {
        const block = data.content_block ?? {}
        if (block.type === 'tool_use') {
          const toolIndex = toolIndexOfBlock.size
          toolIndexOfBlock.set(data.index ?? 0, toolIndex)
          if (block.input && Object.keys(block.input).length > 0)
            startInputs.set(data.index ?? 0, JSON.stringify(block.input))
          const call = {
            index: toolIndex,
            id: block.id,
            type: 'function',
            function: { name: block.name, arguments: '' },
          }
          yield chunk(
            opening(roleSent ? { tool_calls: [call] } : { content: null, tool_calls: [call] }),
          )
        } else if (block.type === 'text') {
          if (block.text || !roleSent) yield chunk(opening({ content: block.text ?? '' }))
        }
        break
      }
      case 'content_block_delta': {
        const delta = data.delta ?? {}
        if (delta.type === 'text_delta') yield chunk({ content: delta.text })
        else if (delta.type === 'input_json_delta' && delta.partial_json) {
          const index = toolIndexOfBlock.get(data.index ?? 0) ?? 0
          if (delta.partial_json.trim() !== '') withArguments.add(data.index ?? 0)
          yield chunk({ tool_calls: [{ index, function: { arguments: delta.partial_json } }] })
        }
        break
      }
      case 'content_block_stop': {
        // A call without arguments streams only an empty piece: its arguments are "{}", as
        // OpenAI sends them and as the answer that is not streamed says, never "". (A server
        // that sent the input whole in the block's start, with no pieces: that input.)
        const index = toolIndexOfBlock.get(data.index ?? 0)
        if (index === undefined || withArguments.has(data.index ?? 0)) break
        const whole = startInputs.get(data.index ?? 0)
        yield chunk({ tool_calls: [{ index, function: { arguments: whole ?? '{}' } }] })
        break
      }
      case 'message_delta':
        rawUsage = withDeltaUsage(rawUsage, data.usage)
        state.usage = mapAnthropicUsage(rawUsage)
        // An answer with no block at all still says whose it is.
        if (!roleSent) yield chunk(opening({ content: '' }))
        yield chunk({}, mapAnthropicStopReason(data.delta?.stop_reason).unified)
        break
      case 'message_stop':
        over = true
        if (state.usage) {
          const usage = openAIUsageShape(state.usage)
          yield { id, object: 'chat.completion.chunk', created, model, choices: [], usage }
        }
        break
      case 'error':
        throw streamFailure(data)
      default:
      // ping and event types added later carry nothing to translate.
    }
  }
  if (!over) throw cutOff('message_stop')
}
