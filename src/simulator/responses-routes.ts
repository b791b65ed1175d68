/**
 * OpenAI's Responses API (`POST /v1/responses`), plain and streamed, as OpenAI answers it: the
 * reply is the one the same prompt gets from chat completions (JSON for a `text.format` schema, as
 * chat's for `response_format`), as a message item with one output_text part, and the stream
 * carries OpenAI's events with their sequence numbers.
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

/** The reply to a request: JSON for the schema `text.format` asks for (structured-reply.ts), else prose. */
function replyTo(
  body: Record<string, unknown>,
  asked: { texts: MessageText[]; key: string; model: string; maxTokens: number | null },
  structuredAnswers: StructuredAnswers,
): Reply {
  const { texts, key, model, maxTokens } = asked
  const shape = responsesAnswerShape(body.text)
  if (!shape) return makeReply({ messages: texts, key, model, choice: 0, maxTokens, stop: [] })
  const plain = () =>
    makeReply({ messages: texts, key, model, choice: 0, maxTokens: null, stop: [] }).text
  return shapedReply(shape, texts, { fallback: structuredAnswers, maxTokens }, plain)
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
  const reply = replyTo(body, { texts, key, model, maxTokens }, structuredAnswers)
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
  const itemId = `msg_${id}`
  const part = (text: string) => ({ type: 'output_text', text, annotations: [] })
  const item = (text: string, status: string) => ({
    id: itemId,
    type: 'message',
    status,
    role: 'assistant',
    content: text === '' && status !== 'completed' ? [] : [part(text)],
  })
  const cut = reply.end === 'length'
  const response = (status: string, withOutput: boolean, noUsage: boolean) => ({
    id: `resp_${id}`,
    object: 'response',
    created_at: Math.floor(Date.now() / 1000),
    status,
    error: null,
    incomplete_details: cut && status !== 'in_progress' ? { reason: 'max_output_tokens' } : null,
    model,
    output: withOutput ? [item(reply.text, 'completed')] : [],
    usage: withOutput && !noUsage ? usage : null,
  })
  const done = cut ? 'incomplete' : 'completed'
  return {
    key,
    build(noUsage) {
      if (body.stream !== true)
        return { text: JSON.stringify(response(done, true, noUsage)), sse: false }
      let sequence = 0
      let text = ''
      const event = (type: string, data: Record<string, unknown>) => {
        text += `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sequence++, ...data })}\n\n`
      }
      const at = { item_id: itemId, output_index: 0, content_index: 0 }
      event('response.created', { response: response('in_progress', false, noUsage) })
      event('response.in_progress', { response: response('in_progress', false, noUsage) })
      event('response.output_item.added', { output_index: 0, item: item('', 'in_progress') })
      event('response.content_part.added', { ...at, part: part('') })
      for (const piece of streamPieces(reply.text))
        event('response.output_text.delta', { ...at, delta: piece, logprobs: [] })
      event('response.output_text.done', { ...at, text: reply.text, logprobs: [] })
      event('response.content_part.done', { ...at, part: part(reply.text) })
      event('response.output_item.done', { output_index: 0, item: item(reply.text, 'completed') })
      event(`response.${done}`, { response: response(done, true, noUsage) })
      return { text, sse: true }
    },
  }
}
