/**
 * An upstream that answers without usage is billed on a bound instead (docs/money-and-limits.md): the prompt's
 * pessimistic token count and one token per byte of what came back, never past the output
 * bound, so never more than the ceiling held. One rule for batch lines (src/dispatch/run-line.ts)
 * and live calls, whole or streamed (src/http/live.ts).
 */
import type { Usage } from '../../providers/types.ts'

/** The usage billed for an answer that reported none: `outputBytes` of content came back. */
export function usageOnBound(
  bounds: { input: number; output: number },
  outputBytes: number,
): Usage {
  return { input_tokens: bounds.input, output_tokens: Math.min(outputBytes, bounds.output) }
}

/**
 * UTF-8 bytes of what a whole answer wrote, in any of the shapes an answer is kept in: a chat
 * completion's message contents and tool-call arguments, a Response's output text and function
 * call arguments, an Anthropic message's text and tool inputs (none for embeddings).
 */
export function answerBytes(response: Record<string, unknown>): number {
  let bytes = 0
  const add = (text: unknown) => (bytes += textBytes(text))
  for (const choice of listOf(response.choices)) {
    const message = (choice as { message?: Record<string, unknown> }).message
    add(message?.content)
    for (const call of listOf(message?.tool_calls))
      add((call as { function?: { arguments?: unknown } }).function?.arguments)
  }
  // A Response: output items, their text parts and function calls' arguments.
  for (const item of listOf(response.output)) {
    const { content, arguments: args } = item as { content?: unknown; arguments?: unknown }
    add(args)
    for (const part of listOf(content)) add((part as { text?: unknown }).text)
  }
  // An Anthropic message: text blocks, and tool_use inputs as the JSON they are written as.
  if (response.type === 'message')
    for (const block of listOf(response.content)) {
      const { text, input } = block as { text?: unknown; input?: unknown }
      add(text)
      if (input !== undefined) add(JSON.stringify(input))
    }
  return bytes
}

type Delta = { content?: unknown; tool_calls?: { function?: { arguments?: unknown } }[] }

/**
 * The same for one streamed chunk, in each API's events (src/live/stream-call.ts): a chat
 * chunk's content and tool-call arguments, an Anthropic `content_block_delta`'s text or tool
 * input, a Responses `….delta` event's text or arguments.
 */
export function deltaBytes(chunk: Record<string, unknown>): number {
  let bytes = 0
  const add = (text: unknown) => (bytes += textBytes(text))
  for (const choice of (chunk.choices as { delta?: Delta }[] | undefined) ?? []) {
    add(choice.delta?.content)
    for (const call of choice.delta?.tool_calls ?? []) add(call.function?.arguments)
  }
  if (chunk.type === 'content_block_delta') {
    const delta = chunk.delta as { text?: unknown; partial_json?: unknown } | undefined
    add(delta?.text)
    add(delta?.partial_json)
  } else if (typeof chunk.type === 'string' && chunk.type.endsWith('.delta')) add(chunk.delta)
  return bytes
}

const textBytes = (text: unknown) =>
  typeof text === 'string' ? Buffer.byteLength(text, 'utf8') : 0

const listOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : [])
