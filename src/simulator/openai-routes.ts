/**
 * OpenAI-compatible bodies: chat completions (plain and streamed; text, structured, or a forced
 * tool call, tool-calls.ts) and embeddings.
 */
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
import { openaiAnswerShape, shapedReply } from './structured-reply.ts'
import { chatForcedTool, forcedCall, functionsCallId } from './tool-calls.ts'
import type { ResolvedSimulatorOptions } from './options.ts'

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

/** One choice's answer: the reply, or the forced call whose arguments are the reply's text. */
interface ChatAnswer {
  reply: Reply
  /** `named`: forced by its name, which OpenAI ends with `stop` (required ends with tool_calls). */
  call: { id: string; name: string; named: boolean } | null
}

/** What a chat completion is rendered from, plain or streamed. */
interface ChatRender {
  id: string
  created: number
  model: string
  answers: ChatAnswer[]
  usage: Record<string, unknown>
  includeUsage: boolean
}

function finishOf({ reply, call }: ChatAnswer): string {
  if (call === null || reply.end !== 'stop') return finishReasons[reply.end]
  return call.named ? 'stop' : 'tool_calls'
}

function chatMessage({ reply, call }: ChatAnswer): Record<string, unknown> {
  if (call === null) return { role: 'assistant', content: reply.text, refusal: null }
  const { id, name } = call
  const toolCall = { id, type: 'function', function: { name, arguments: reply.text } }
  return { role: 'assistant', content: null, tool_calls: [toolCall], refusal: null }
}

function chatCompletion(render: ChatRender, noUsage: boolean): string {
  const { id, created, model, answers, usage } = render
  const completion: Record<string, unknown> = {
    id,
    object: 'chat.completion',
    created,
    model,
    choices: answers.map((answer, index) => ({
      index,
      message: chatMessage(answer),
      logprobs: null,
      finish_reason: finishOf(answer),
    })),
    system_fingerprint: 'fp_sim',
  }
  if (!noUsage) completion.usage = usage
  return JSON.stringify(completion)
}

/**
 * A choice's deltas: role, then content pieces; or, as OpenAI streams a call, its id and name,
 * then its arguments in pieces.
 */
function chatDeltas({ reply, call }: ChatAnswer): Record<string, unknown>[] {
  const pieces = streamPieces(reply.text)
  if (call === null) {
    return [{ role: 'assistant', content: '' }, ...pieces.map((content) => ({ content }))]
  }
  const opening = {
    index: 0,
    id: call.id,
    type: 'function',
    function: { name: call.name, arguments: '' },
  }
  return [
    { role: 'assistant', content: null, tool_calls: [opening], refusal: null },
    ...pieces.map((piece) => ({ tool_calls: [{ index: 0, function: { arguments: piece } }] })),
  ]
}

function chatStream(render: ChatRender, noUsage: boolean): string {
  const { id, created, model, answers, usage, includeUsage } = render
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
  answers.forEach((answer, index) => {
    for (const delta of chatDeltas(answer))
      events.push(chunk([{ index, delta, logprobs: null, finish_reason: null }]))
    events.push(chunk([{ index, delta: {}, logprobs: null, finish_reason: finishOf(answer) }]))
  })
  if (includeUsage && !noUsage) {
    events.push([null, { id, object: 'chat.completion.chunk', created, model, choices: [], usage }])
  }
  return sseText(events, true)
}

/** The simulator's settings a chat answer reads. */
export type ChatOptions = Pick<
  ResolvedSimulatorOptions,
  'usageFactor' | 'structuredAnswers' | 'toolCallIds'
>

export function prepareChat(
  body: Record<string, unknown>,
  id: string,
  options: ChatOptions,
): Prepared | Response {
  const { usageFactor, structuredAnswers } = options
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
  const forced = chatForcedTool(body.tools, body.tool_choice)
  const answers: ChatAnswer[] = []
  for (let choice = 0; choice < n; choice++) {
    const plain = () =>
      makeReply({ messages: texts, key, model, choice, maxTokens: null, stop: [] }).text
    if (forced) {
      const call = forcedCall(forced, plain(), maxTokens)
      const callId =
        options.toolCallIds === 'functions'
          ? functionsCallId(call.name, messages)
          : `call_${hashText(`${id}\u0000${choice}`)}`
      const named = forced.named
      answers.push({ reply: call.arguments, call: { id: callId, name: call.name, named } })
    } else if (shape) {
      const asked = { fallback: structuredAnswers, maxTokens }
      answers.push({ reply: shapedReply(shape, texts, asked, plain), call: null })
    } else {
      const reply = makeReply({ messages: texts, key, model, choice, maxTokens, stop })
      answers.push({ reply, call: null })
    }
  }
  const promptTokens = Math.ceil(countPromptTokens(texts) * usageFactor)
  let completionTokens = 0
  for (const { reply } of answers) completionTokens += reply.words
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
  const render: ChatRender = { id, created, model, answers, usage, includeUsage }
  return {
    key,
    build(noUsage) {
      if (!stream) return { text: chatCompletion(render, noUsage), sse: false }
      return { text: chatStream(render, noUsage), sse: true }
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
