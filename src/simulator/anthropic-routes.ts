/** Anthropic Messages API bodies: plain and streamed. */
import { anthropicCacheUsage, cacheUsageOf } from './cache-usage.ts'
import type { Prepared } from './prepared.ts'
import {
  anthropicMessageTexts,
  countPromptTokens,
  makeReply,
  promptKey,
  streamPieces,
} from './reply.ts'
import { errorResponse, sseText } from './respond.ts'
import {
  anthropicAnswerShape,
  structuredMode,
  structuredReply,
  type StructuredAnswers,
} from './structured-reply.ts'

const stopReasons = { stop: 'end_turn', stop_sequence: 'stop_sequence', length: 'max_tokens' }

function invalid(message: string): Response {
  return errorResponse('anthropic', 400, { type: 'invalid_request_error', message })
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
  const stop = Array.isArray(body.stop_sequences)
    ? body.stop_sequences.filter((s): s is string => typeof s === 'string')
    : []
  const texts = anthropicMessageTexts(body.system, messages)
  const key = promptKey(texts)
  const shape = anthropicAnswerShape(body.output_config)
  const reply = shape
    ? structuredReply(
        shape,
        structuredMode(texts, structuredAnswers),
        makeReply({ messages: texts, key, model, choice: 0, maxTokens: null, stop: [] }).text,
        maxTokens,
      )
    : makeReply({ messages: texts, key, model, choice: 0, maxTokens, stop })
  const inputTokens = Math.ceil(countPromptTokens(texts) * usageFactor)
  const prompt = anthropicCacheUsage(inputTokens, cacheUsageOf(texts, inputTokens))
  const outputTokens = Math.ceil(reply.words * usageFactor)
  const stopReason = stopReasons[reply.end]

  return {
    key,
    build(noUsage) {
      const usage = noUsage ? {} : { usage: { ...prompt, output_tokens: outputTokens } }
      if (body.stream !== true) {
        const message = {
          id,
          type: 'message',
          role: 'assistant',
          model,
          content: [{ type: 'text', text: reply.text }],
          stop_reason: stopReason,
          stop_sequence: reply.stopSequence,
          ...usage,
        }
        return { text: JSON.stringify(message), sse: false }
      }
      // Like the real API: message_start reports the input and a token or so of output so far;
      // message_delta carries the final, cumulative output_tokens.
      const startUsage = noUsage
        ? {}
        : { usage: { ...prompt, output_tokens: Math.min(1, reply.words) } }
      const events: [string, unknown][] = [
        [
          'message_start',
          {
            type: 'message_start',
            message: {
              id,
              type: 'message',
              role: 'assistant',
              model,
              content: [],
              stop_reason: null,
              stop_sequence: null,
              ...startUsage,
            },
          },
        ],
        [
          'content_block_start',
          { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        ],
        ['ping', { type: 'ping' }],
      ]
      for (const text of streamPieces(reply.text)) {
        events.push([
          'content_block_delta',
          { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } },
        ])
      }
      events.push(['content_block_stop', { type: 'content_block_stop', index: 0 }])
      events.push([
        'message_delta',
        {
          type: 'message_delta',
          delta: { stop_reason: stopReason, stop_sequence: reply.stopSequence },
          ...(noUsage ? {} : { usage: { output_tokens: outputTokens } }),
        },
      ])
      events.push(['message_stop', { type: 'message_stop' }])
      return { text: sseText(events, false), sse: true }
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
