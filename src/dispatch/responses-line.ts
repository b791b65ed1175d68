/**
 * Batch lines with `"url": "/v1/responses"` (docs/clients/responses.md), by the live calls' rule:
 * sent as they came to offerings with `responses_api`, as the chat call the body translates to
 * to the others (validated up front by the same translation, so it cannot fail here unless the
 * gateway changed). The answer is kept in the Response object's shape either way.
 */
import { convertChatToResponse } from '../../providers/responses/convert-chat-to-response.ts'
import { convertResponsesToChat } from '../../providers/responses/convert-responses-to-chat.ts'
import type { Outcome } from '../../providers/types.ts'
import type { Offering } from '../catalog/catalog-file.ts'
import { offeringSpeaks } from '../catalog/speaks-api.ts'
import type { NativeRequest } from '../upstream/upstreams.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { RESPONSES_URL } from '../domain.ts'

type Answer = Extract<Outcome, { ok: true }>

export interface LineRequest {
  /** The chat body the line is validated, routed and priced by. */
  body: Record<string, unknown>
  /** The Responses request it stands for; null for a chat or embeddings line. */
  responses: Record<string, unknown> | null
  /**
   * The Responses request as sent to offerings with `responses_api` (nothing stored there);
   * `untranslated` is set when `body` left fields of it out: why only those offerings may take it.
   */
  native?: NativeRequest & { untranslated?: string }
}

/** What a line sends; a message when the body no longer translates. */
export function lineRequest(parsed: {
  url: string
  body: Record<string, unknown>
}): LineRequest | { problem: string } {
  if (parsed.url !== RESPONSES_URL) return { body: parsed.body, responses: null }
  // OpenAI stores a response unless told not to; the gateway promises nothing is stored.
  const native = { api: 'responses' as const, body: { ...parsed.body, store: false } }
  const strict = convertResponsesToChat(parsed.body, { lenient: false })
  if (strict.ok) return { body: strict.body, responses: parsed.body, native }
  // Outside the subset: validation let it in for the model's offerings with responses_api.
  const lenient = convertResponsesToChat(parsed.body, { lenient: true })
  if (!lenient.ok) return { problem: `body.${lenient.param} ${lenient.message}` }
  const untranslated = `body.${strict.param} ${strict.message}`
  return { body: lenient.body, responses: parsed.body, native: { ...native, untranslated } }
}

/**
 * The answer as stored: a Responses line's as its Response object (never the upstream's text),
 * the provider's own when the offering took the request as it came, else translated from chat.
 */
export function answerFor(
  outcome: Answer,
  request: LineRequest,
  catalog: Pick<Catalog, 'provider'>,
  offering: Offering,
): Answer {
  if (!request.responses) return outcome
  if (offeringSpeaks(catalog, offering, 'responses')) return { ...outcome, text: undefined }
  return {
    ...outcome,
    text: undefined,
    body: convertChatToResponse(outcome.body, request.responses),
  }
}
