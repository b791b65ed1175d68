/**
 * OpenAI's Responses API (`POST /v1/responses`), plain and streamed, as OpenAI answers it: the
 * reply is the one the same prompt gets from chat completions (JSON for a `text.format` schema, as
 * chat's for `response_format`), as a message item with one output_text part, or a forced
 * function tool's call as a function_call item (tool-calls.ts); the Response echoes the request's
 * settings, and the stream carries OpenAI's events with their sequence numbers.
 */
import { cacheUsageOf, openAICacheDetails } from './cache-usage.ts'
import type { Prepared } from './prepared.ts'
import {
  countPromptTokens,
  makeReply,
  promptKey,
  streamPieces,
  type MessageText,
  type Reply,
} from './reply.ts'
import { errorResponse } from './respond.ts'
import { responsesAnswerShape, shapedReply, type StructuredAnswers } from './structured-reply.ts'
import { forcedCall, responsesForcedTool, type ToolCall } from './tool-calls.ts'

function invalid(message: string): Response {
  return errorResponse('openai', 400, { type: 'invalid_request_error', message })
}

function partsText(content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return content
    .map((part: { text?: unknown }) => (typeof part?.text === 'string' ? part.text : ''))
    .join('')
}

/** The input as the messages a reply is made from; instructions count as a system message. */
function inputTexts(body: Record<string, unknown>): MessageText[] | null {
  const texts: MessageText[] = []
  if (typeof body.instructions === 'string') texts.push({ role: 'system', text: body.instructions })
  if (typeof body.input === 'string') return [...texts, { role: 'user', text: body.input }]
  if (!Array.isArray(body.input) || body.input.length === 0) return null
  for (const item of body.input as Record<string, unknown>[]) {
    texts.push({ role: String(item?.role ?? 'user'), text: partsText(item?.content) })
  }
  return texts
}

/** The reply: the forced call's arguments, JSON for a `text.format` schema, or prose. */
function replyTo(
  body: Record<string, unknown>,
  asked: { texts: MessageText[]; key: string; model: string; maxTokens: number | null },
  structuredAnswers: StructuredAnswers,
): { reply: Reply; call: ToolCall | null } {
  const { texts, key, model, maxTokens } = asked
  const plain = () =>
    makeReply({ messages: texts, key, model, choice: 0, maxTokens: null, stop: [] }).text
  const forced = responsesForcedTool(body.tools, body.tool_choice)
  if (forced) {
    const call = forcedCall(forced, plain(), maxTokens)
    return { reply: call.arguments, call }
  }
  const shape = responsesAnswerShape(body.text)
  if (!shape) {
    const reply = makeReply({ messages: texts, key, model, choice: 0, maxTokens, stop: [] })
    return { reply, call: null }
  }
  const fallback = { fallback: structuredAnswers, maxTokens }
  return { reply: shapedReply(shape, texts, fallback, plain), call: null }
}

/** The request's settings, echoed in the Response as OpenAI echoes them, with its defaults. */
function echoedFields(body: Record<string, unknown>): Record<string, unknown> {
  const or = (value: unknown, fallback: unknown) => (value === undefined ? fallback : value)
  return {
    instructions: or(body.instructions, null),
    max_output_tokens: or(body.max_output_tokens, null),
    parallel_tool_calls: or(body.parallel_tool_calls, true),
    store: or(body.store, true),
    temperature: or(body.temperature, 1),
    text: or(body.text, { format: { type: 'text' } }),
    tool_choice: or(body.tool_choice, 'auto'),
    tools: or(body.tools, []),
    top_p: or(body.top_p, 1),
    metadata: or(body.metadata, {}),
  }
}

/** What a Response is rendered from, plain or streamed. */
interface ResponseRender {
  id: string
  model: string
  created: number
  echoed: Record<string, unknown>
  /** The message's text, or the forced call's arguments. */
  reply: Reply
  call: { id: string; callId: string; name: string } | null
  usage: Record<string, unknown>
}

/** The one output item: the message with its output_text part, or the function call. */
function outputItem(render: ResponseRender, text: string, status: string) {
  const { id, call } = render
  if (call !== null) {
    const { name, callId } = call
    return { id: call.id, type: 'function_call', status, arguments: text, call_id: callId, name }
  }
  const content = text === '' && status !== 'completed' ? [] : [outputText(text)]
  return { id: `msg_${id}`, type: 'message', status, role: 'assistant', content }
}

function outputText(text: string) {
  return { type: 'output_text', text, annotations: [] }
}

/** The Response; `usage` null while in progress, or when the no-usage fault leaves it out. */
function responseObject(render: ResponseRender, status: string, usage: unknown) {
  const { id, model, created, echoed, reply } = render
  const cut = reply.end === 'length' && status !== 'in_progress'
  return {
    id: `resp_${id}`,
    object: 'response',
    created_at: created,
    status,
    error: null,
    incomplete_details: cut ? { reason: 'max_output_tokens' } : null,
    model,
    output: status === 'in_progress' ? [] : [outputItem(render, reply.text, 'completed')],
    ...echoed,
    usage,
  }
}

/** The item's events between output_item.added and output_item.done. */
function itemEvents(render: ResponseRender, event: (type: string, data: object) => void) {
  const { reply, call } = render
  const pieces = streamPieces(reply.text)
  if (call !== null) {
    const at = { item_id: call.id, output_index: 0 }
    for (const delta of pieces) event('response.function_call_arguments.delta', { ...at, delta })
    event('response.function_call_arguments.done', {
      ...at,
      name: call.name,
      arguments: reply.text,
    })
    return
  }
  const at = { item_id: `msg_${render.id}`, output_index: 0, content_index: 0 }
  event('response.content_part.added', { ...at, part: outputText('') })
  for (const delta of pieces) event('response.output_text.delta', { ...at, delta, logprobs: [] })
  event('response.output_text.done', { ...at, text: reply.text, logprobs: [] })
  event('response.content_part.done', { ...at, part: outputText(reply.text) })
}

function responseStream(render: ResponseRender, done: string, noUsage: boolean): string {
  let sequence = 0
  let text = ''
  const event = (type: string, data: object) => {
    text += `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`
  }
  const pending = responseObject(render, 'in_progress', null)
  event('response.created', { response: pending })
  event('response.in_progress', { response: pending })
  event('response.output_item.added', {
    output_index: 0,
    item: outputItem(render, '', 'in_progress'),
  })
  itemEvents(render, event)
  const item = outputItem(render, render.reply.text, 'completed')
  event('response.output_item.done', { output_index: 0, item })
  const final = responseObject(render, done, noUsage ? null : render.usage)
  event(`response.${done}`, { response: final })
  return text
}

export function prepareResponses(
  body: Record<string, unknown>,
  id: string,
  usageFactor = 1,
  structuredAnswers: StructuredAnswers = 'valid',
): Prepared | Response {
  const { model } = body
  if (typeof model !== 'string') return invalid('you must provide a model parameter')
  const texts = inputTexts(body)
  if (!texts) return invalid("'input' must be a string or a non-empty array")
  const maxTokens = typeof body.max_output_tokens === 'number' ? body.max_output_tokens : null
  const key = promptKey(texts)
  const { reply, call } = replyTo(body, { texts, key, model, maxTokens }, structuredAnswers)
  const input = Math.ceil(countPromptTokens(texts) * usageFactor)
  const output = Math.ceil(reply.words * usageFactor)
  // OpenAI's Responses usage names prompt-cache reads (and writes) under input_tokens_details.
  const cache = cacheUsageOf(texts, input)
  const usage = {
    input_tokens: input,
    input_tokens_details: cache ? openAICacheDetails(cache) : { cached_tokens: 0 },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: input + output,
  }
  const render: ResponseRender = {
    id,
    model,
    created: Math.floor(Date.now() / 1000),
    echoed: echoedFields(body),
    reply,
    call: call && { id: `fc_${id}`, callId: `call_${id}`, name: call.name },
    usage,
  }
  const done = reply.end === 'length' ? 'incomplete' : 'completed'
  return {
    key,
    build(noUsage) {
      if (body.stream === true) return { text: responseStream(render, done, noUsage), sse: true }
      const response = responseObject(render, done, noUsage ? null : usage)
      return { text: JSON.stringify(response), sse: false }
    },
  }
}
