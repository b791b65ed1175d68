/** OpenAI-compatible bodies: chat completions (plain and streamed) and embeddings. */
import { cacheUsageOf, openAICacheDetails } from './cache-usage.ts'
import type { Prepared } from './prepared.ts'
import {
  countPromptTokens,
  embeddingVector,
  hashText,
  makeReply,
  openaiMessageTexts,
  promptKey,
  streamPieces,
  utf8Bytes,
  type Reply,
} from './reply.ts'
import { errorResponse, sseText } from './respond.ts'
import { openaiAnswerShape, shapedReply, type StructuredAnswers } from './structured-reply.ts'

const finishReasons = { stop: 'stop', stop_sequence: 'stop', length: 'length' } as const

function invalid(message: string): Response {
  return errorResponse('openai', 400, { type: 'invalid_request_error', message })
}

function optionalCount(value: unknown): number | null {
  return typeof value === 'number' && Number.isInteger(value) ? value : null
}

function stopList(stop: unknown): string[] {
  if (typeof stop === 'string') return [stop]
  return Array.isArray(stop) ? stop.filter((s): s is string => typeof s === 'string') : []
}

export function prepareChat(
  body: Record<string, unknown>,
  id: string,
  usageFactor = 1,
  structuredAnswers: StructuredAnswers = 'valid',
): Prepared | Response {
  const { model, messages } = body
  if (typeof model !== 'string') return invalid('you must provide a model parameter')
  if (!Array.isArray(messages) || messages.length === 0) {
    return invalid("'messages' must be a non-empty array")
  }
  const n = optionalCount(body.n) ?? 1
  if (n < 1 || n > 128) return invalid("'n' must be between 1 and 128")
  const maxTokens = optionalCount(body.max_completion_tokens) ?? optionalCount(body.max_tokens)
  const texts = openaiMessageTexts(messages)
  const key = promptKey(texts)
  const stop = stopList(body.stop)
  const shape = openaiAnswerShape(body.response_format)
  const replies: Reply[] = []
  for (let choice = 0; choice < n; choice++) {
    if (shape) {
      const plain = () =>
        makeReply({ messages: texts, key, model, choice, maxTokens: null, stop: [] }).text
      replies.push(shapedReply(shape, texts, { fallback: structuredAnswers, maxTokens }, plain))
    } else replies.push(makeReply({ messages: texts, key, model, choice, maxTokens, stop }))
  }
  const promptTokens = Math.ceil(countPromptTokens(texts) * usageFactor)
  let completionTokens = 0
  for (const reply of replies) completionTokens += reply.words
  completionTokens = Math.ceil(completionTokens * usageFactor)
  const cache = cacheUsageOf(texts, promptTokens)
  const usage = {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    ...(cache ? { prompt_tokens_details: openAICacheDetails(cache) } : {}),
  }
  const created = Math.floor(Date.now() / 1000)
  const streamOptions = body.stream_options as { include_usage?: unknown } | undefined
  const stream = body.stream === true
  const includeUsage = stream && streamOptions?.include_usage === true

  return {
    key,
    build(noUsage) {
      if (!stream) {
        const completion: Record<string, unknown> = {
          id,
          object: 'chat.completion',
          created,
          model,
          choices: replies.map((reply, index) => ({
            index,
            message: { role: 'assistant', content: reply.text, refusal: null },
            logprobs: null,
            finish_reason: finishReasons[reply.end],
          })),
          system_fingerprint: 'fp_sim',
        }
        if (!noUsage) completion.usage = usage
        return { text: JSON.stringify(completion), sse: false }
      }
      const chunk = (choices: unknown[]) => {
        const base: Record<string, unknown> = {
          id,
          object: 'chat.completion.chunk',
          created,
          model,
          system_fingerprint: 'fp_sim',
          choices,
        }
        // OpenAI sends usage: null on every chunk before the last when usage was asked for.
        if (includeUsage) base.usage = null
        return [null, base] as [null, unknown]
      }
      const events: [null, unknown][] = []
      replies.forEach((reply, index) => {
        const delta = (content: string, role?: string) => ({
          index,
          delta: role ? { role, content } : { content },
          logprobs: null,
          finish_reason: null,
        })
        events.push(chunk([delta('', 'assistant')]))
        for (const piece of streamPieces(reply.text)) events.push(chunk([delta(piece)]))
        const end = { index, delta: {}, logprobs: null, finish_reason: finishReasons[reply.end] }
        events.push(chunk([end]))
      })
      if (includeUsage && !noUsage) {
        events.push([
          null,
          { id, object: 'chat.completion.chunk', created, model, choices: [], usage },
        ])
      }
      return { text: sseText(events, true), sse: true }
    },
  }
}

export function prepareEmbeddings(
  body: Record<string, unknown>,
  defaultDims: number,
): Prepared | Response {
  const { model, input } = body
  if (typeof model !== 'string') return invalid('you must provide a model parameter')
  let inputs: (string | number[])[]
  if (typeof input === 'string') inputs = [input]
  else if (Array.isArray(input) && input.length > 0 && input.every((i) => typeof i === 'number')) {
    inputs = [input as number[]]
  } else if (Array.isArray(input) && input.length > 0) inputs = input as (string | number[])[]
  else return invalid("'input' must be a non-empty string or array")
  const dims = optionalCount(body.dimensions) ?? defaultDims
  if (dims < 1 || dims > 4096) return invalid("'dimensions' must be between 1 and 4096")
  let tokens = 0
  const strings = inputs.map((item) => {
    const text = typeof item === 'string' ? item : JSON.stringify(item)
    tokens += typeof item === 'string' ? Math.ceil(utf8Bytes(item) / 4) : item.length
    return text
  })
  const base64 = body.encoding_format === 'base64'
  return {
    key: hashText('embeddings\u0000' + strings.join('\u0001')),
    build(noUsage) {
      const response: Record<string, unknown> = {
        object: 'list',
        data: strings.map((text, index) => {
          const vector = embeddingVector(text, dims)
          const embedding = base64
            ? Buffer.from(new Float32Array(vector).buffer).toString('base64')
            : vector
          return { object: 'embedding', index, embedding }
        }),
        model,
      }
      if (!noUsage) response.usage = { prompt_tokens: tokens, total_tokens: tokens }
      return { text: JSON.stringify(response), sse: false }
    },
  }
}
