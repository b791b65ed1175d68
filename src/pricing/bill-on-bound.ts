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
  const add = (text: unknown) => {
    if (typeof text === 'string') bytes += Buffer.byteLength(text, 'utf8')
  }
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

const listOf = (value: unknown): unknown[] => (Array.isArray(value) ? value : [])
