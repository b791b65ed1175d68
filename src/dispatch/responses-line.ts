/**
 * Batch lines with `"url": "/v1/responses"` (docs/clients/responses.md), by the live calls' rule: passed through
 * as they came when every offering of their model serves the Responses API, else run as the chat
 * call the body translates to (validated up front by the same translation, so it cannot fail here
 * unless the gateway changed). The answer is kept in the Response object's shape either way.
 */
import { convertChatToResponse } from '../../providers/responses/convert-chat-to-response.ts'
import { convertResponsesToChat } from '../../providers/responses/convert-responses-to-chat.ts'
import type { Outcome } from '../../providers/types.ts'
import { servesResponses } from '../catalog/responses-api.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { RESPONSES_URL } from '../domain.ts'

type Answer = Extract<Outcome, { ok: true }>

export interface LineRequest {
  /** The chat body the line is validated, routed and priced by. */
  body: Record<string, unknown>
  /** The Responses request it stands for; null for a chat or embeddings line. */
  responses: Record<string, unknown> | null
  /** The Responses request as sent upstream when passed through, else undefined. */
  passedThrough?: Record<string, unknown>
}

/** What a line sends; a message when the body no longer translates. */
export function lineRequest(
  parsed: { url: string; body: Record<string, unknown> },
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
): LineRequest | { problem: string } {
  if (parsed.url !== RESPONSES_URL) return { body: parsed.body, responses: null }
  const through = servesResponses(catalog, parsed.body.model)
  const converted = convertResponsesToChat(parsed.body, { lenient: through })
  if (!converted.ok) return { problem: `body.${converted.param} ${converted.message}` }
  // OpenAI stores a response unless told not to; the gateway promises nothing is stored.
  const passedThrough = through ? { ...parsed.body, store: false } : undefined
  return { body: converted.body, responses: parsed.body, passedThrough }
}

/** The answer as stored: a Responses line's as its Response object (never the upstream's text). */
export function answerFor(outcome: Answer, request: LineRequest): Answer {
  if (!request.responses) return outcome
  // Passed through, the upstream's answer is the Response object already.
  if (request.passedThrough) return { ...outcome, text: undefined }
  return {
    ...outcome,
    text: undefined,
    body: convertChatToResponse(outcome.body, request.responses),
  }
}
