/**
 * Batch lines with `"url": "/v1/responses"` (docs/clients/responses.md): the line runs as the chat call its body
 * translates to (validated up front by the same translation, so it cannot fail here unless the
 * gateway changed), and its answer is kept in the Response object's shape.
 */
import { convertChatToResponse } from '../../providers/responses/convert-chat-to-response.ts'
import { convertResponsesToChat } from '../../providers/responses/convert-responses-to-chat.ts'
import type { Outcome } from '../../providers/types.ts'
import { RESPONSES_URL } from '../domain.ts'

type Answer = Extract<Outcome, { ok: true }>

/**
 * The chat body a line sends, and the Responses request it stands for (null for a chat or
 * embeddings line); a message when the body no longer translates.
 */
export function lineRequest(parsed: {
  url: string
  body: Record<string, unknown>
}):
  | { body: Record<string, unknown>; responses: Record<string, unknown> | null }
  | { problem: string } {
  if (parsed.url !== RESPONSES_URL) return { body: parsed.body, responses: null }
  const converted = convertResponsesToChat(parsed.body)
  if (!converted.ok) return { problem: `body.${converted.param} ${converted.message}` }
  return { body: converted.body, responses: parsed.body }
}

/** The answer as stored: a Responses line's as its Response object (never the upstream's text). */
export function answerFor(outcome: Answer, responses: Record<string, unknown> | null): Answer {
  if (!responses) return outcome
  return { ...outcome, text: undefined, body: convertChatToResponse(outcome.body, responses) }
}
