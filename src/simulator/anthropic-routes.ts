/**
 * Anthropic Messages API bodies, plain and streamed: one content block, text (prose or structured
 * JSON) or the forced tool call's tool_use (tool-calls.ts).
 */
import { anthropicCacheUsage, cacheUsageOf } from './cache-usage.ts'
import type { Prepared } from './prepared.ts'
import {
  anthropicMessageTexts,
  countPromptTokens,
  hashText,
  makeReply,
  promptKey,
  streamPieces,
  type MessageText,
  type Reply,
} from './reply.ts'
import { errorResponse, sseText } from './respond.ts'
import {
  anthropicAnswerShape,
  structuredMode,
  structuredReply,
  type StructuredAnswers,
} from './structured-reply.ts'
import { forcedCall, messagesForcedTool, type ToolCall } from './tool-calls.ts'
import { anthropicBodyProblem } from './anthropic-body-rules.ts'

const stopReasons = { stop: 'end_turn', stop_sequence: 'stop_sequence', length: 'max_tokens' }

function invalid(message: string): Response {
  return errorResponse('anthropic', 400, { type: 'invalid_request_error', message })
}

/** What a message is rendered from, plain or streamed. */
interface MessageRender {
  id: string
  model: string
  /** The text, or the forced call's input as JSON text. */
  reply: Reply
  call: { id: string; name: string; input: Record<string, unknown> } | null
  prompt: ReturnType<typeof anthropicCacheUsage>
  outputTokens: number
}

function stopReasonOf({ reply, call }: MessageRender): string {
  return call !== null && reply.end === 'stop' ? 'tool_use' : stopReasons[reply.end]
}

function contentBlock({ reply, call }: MessageRender): Record<string, unknown> {
  if (call === null) return { type: 'text', text: reply.text }
  return { type: 'tool_use', id: call.id, name: call.name, input: call.input }
}

function messageBody(render: MessageRender, noUsage: boolean): string {
  const { id, model, reply, prompt, outputTokens } = render
  const message = {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content: [contentBlock(render)],
    stop_reason: stopReasonOf(render),
    stop_sequence: reply.stopSequence,
    ...(noUsage ? {} : { usage: { ...prompt, output_tokens: outputTokens } }),
  }
  return JSON.stringify(message)
}

/** One server-sent event: its name and its data. */
type SseEvent = [string, unknown]

/** The block's start and deltas: text, or (as Anthropic streams a call) input {} then its JSON. */
function blockEvents({ reply, call }: MessageRender): SseEvent[] {
  const start = (block: Record<string, unknown>): SseEvent => [
    'content_block_start',
    { type: 'content_block_start', index: 0, content_block: block },
  ]
  const delta = (fields: Record<string, unknown>): SseEvent => [
    'content_block_delta',
    { type: 'content_block_delta', index: 0, delta: fields },
  ]
  const pieces = streamPieces(reply.text)
  if (call === null) {
    const deltas = pieces.map((text) => delta({ type: 'text_delta', text }))
    return [start({ type: 'text', text: '' }), ['ping', { type: 'ping' }], ...deltas]
  }
  // Anthropic opens a tool_use block's JSON with an empty piece, and a call without arguments
  // is that piece alone: no "{}" follows.
  const empty = reply.text.trim() === '{}'
  const json = ['', ...(empty ? [] : pieces)].map((partial) =>
    delta({ type: 'input_json_delta', partial_json: partial }),
  )
  const block = { type: 'tool_use', id: call.id, name: call.name, input: {} }
  return [start(block), ['ping', { type: 'ping' }], ...json]
}

function messageStream(render: MessageRender, noUsage: boolean): string {
  const { id, model, reply, prompt, outputTokens } = render
  // Like the real API: message_start reports the input and a token or so of output so far;
  // message_delta carries the final, cumulative output_tokens.
  const startUsage = noUsage
    ? {}
    : { usage: { ...prompt, output_tokens: Math.min(1, reply.words) } }
  const message = {
    id,
    type: 'message',
    role: 'assistant',
    model,
    content: [],
    stop_reason: null,
    stop_sequence: null,
    ...startUsage,
  }
  const events: SseEvent[] = [
    ['message_start', { type: 'message_start', message }],
    ...blockEvents(render),
    ['content_block_stop', { type: 'content_block_stop', index: 0 }],
    [
      'message_delta',
      {
        type: 'message_delta',
        delta: { stop_reason: stopReasonOf(render), stop_sequence: reply.stopSequence },
        ...(noUsage ? {} : { usage: { output_tokens: outputTokens } }),
      },
    ],
    ['message_stop', { type: 'message_stop' }],
  ]
  return sseText(events, false)
}

/** The reply: the forced tool call's input (tool-calls.ts), structured JSON, or prose. */
function replyTo(
  body: Record<string, unknown>,
  asked: { texts: MessageText[]; key: string; model: string; maxTokens: number },
  structuredAnswers: StructuredAnswers,
): { reply: Reply; call: ToolCall | null } {
  const { texts, key, model, maxTokens } = asked
  const plain = () =>
    makeReply({ messages: texts, key, model, choice: 0, maxTokens: null, stop: [] }).text
  const forced = messagesForcedTool(body.tools, body.tool_choice)
  if (forced) {
    const call = forcedCall(forced, plain(), maxTokens)
    return { reply: call.arguments, call }
  }
  const shape = anthropicAnswerShape(body.output_config)
  if (shape) {
    const mode = structuredMode(texts, structuredAnswers)
    return { reply: structuredReply(shape, mode, plain(), maxTokens), call: null }
  }
  const stop = Array.isArray(body.stop_sequences)
    ? body.stop_sequences.filter((s): s is string => typeof s === 'string')
    : []
  return {
    reply: makeReply({ messages: texts, key, model, choice: 0, maxTokens, stop }),
    call: null,
  }
}

export function prepareMessages(
  body: Record<string, unknown>,
  id: string,
  usageFactor = 1,
  structuredAnswers: StructuredAnswers = 'valid',
): Prepared | Response {
  const { model, messages, max_tokens: maxTokens } = body
  if (typeof model !== 'string') return invalid('model: Field required')
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1) {
    return invalid('max_tokens: Field required')
  }
  if (!Array.isArray(messages) || messages.length === 0) {
    return invalid('messages: at least one message is required')
  }
  for (const message of messages as { role?: unknown }[]) {
    if (message?.role !== 'user' && message?.role !== 'assistant') {
      return invalid(`messages: Unexpected role "${String(message?.role)}"`)
    }
  }
  const broken = anthropicBodyProblem(body)
  if (broken) return invalid(broken)
  const texts = anthropicMessageTexts(body.system, messages)
  const key = promptKey(texts)
  const { reply, call } = replyTo(body, { texts, key, model, maxTokens }, structuredAnswers)
  const inputTokens = Math.ceil(countPromptTokens(texts) * usageFactor)
  const render: MessageRender = {
    id,
    model,
    reply,
    call: call && { id: `toolu_${hashText(id)}`, name: call.name, input: call.input },
    prompt: anthropicCacheUsage(inputTokens, cacheUsageOf(texts, inputTokens)),
    outputTokens: Math.ceil(reply.words * usageFactor),
  }
  return {
    key,
    build(noUsage) {
      if (body.stream !== true) return { text: messageBody(render, noUsage), sse: false }
      return { text: messageStream(render, noUsage), sse: true }
    },
  }
}

/**
 * `POST /v1/messages/count_tokens`: the prompt tokens a Messages request with this body would
 * report as its input (before any usage factor), as Anthropic's own count does.
 */
export function countMessageTokens(body: Record<string, unknown>): Response {
  const { model, messages } = body
  if (typeof model !== 'string') return invalid('model: Field required')
  if (!Array.isArray(messages) || messages.length === 0) {
    return invalid('messages: at least one message is required')
  }
  const texts = anthropicMessageTexts(body.system, messages)
  return Response.json({ input_tokens: countPromptTokens(texts) })
}
