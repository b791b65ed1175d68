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

/** UTF-8 bytes of the message contents of a whole chat answer (none for embeddings). */
export function answerBytes(response: Record<string, unknown>): number {
  let bytes = 0
  for (const choice of (response.choices as { message?: { content?: unknown } }[] | undefined) ??
    []) {
    if (typeof choice.message?.content === 'string')
      bytes += Buffer.byteLength(choice.message.content, 'utf8')
  }
  return bytes
}
