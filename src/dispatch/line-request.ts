/**
 * What a batch line sends, by the live calls' rule: a chat or embeddings line its body; a line in a
 * provider's own API — `"url": "/v1/responses"` (docs/clients/responses.md) or a Message Batches
 * request, `"url": "/v1/messages"` (docs/clients/anthropic-sdk.md) — goes as it came to the offerings
 * that speak that API, and as the chat call it translates to to the others (validated up front by
 * the same translation, so it cannot fail here unless the gateway changed). The answer is kept in
 * the shape of the API the line came in either way.
 */
import { convertChatToMessage } from '../../providers/anthropic/convert-chat-to-message.ts'
import { convertMessagesToChat } from '../../providers/anthropic/convert-messages-to-chat.ts'
import { convertChatToResponse } from '../../providers/responses/convert-chat-to-response.ts'
import { convertResponsesToChat } from '../../providers/responses/convert-responses-to-chat.ts'
import type { Outcome } from '../../providers/types.ts'
import type { Offering } from '../catalog/catalog-file.ts'
import { offeringSpeaks } from '../catalog/speaks-api.ts'
import type { NativeRequest } from '../upstream/upstreams.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { MESSAGES_URL, RESPONSES_URL } from '../domain.ts'

type Answer = Extract<Outcome, { ok: true }>

export interface LineRequest {
  /** The chat body the line is validated, routed and priced by. */
  body: Record<string, unknown>
  /**
   * The request as sent to the offerings that speak its API (a Responses one with nothing stored
   * there); unset for a chat or embeddings line. `asked` is the line's body as the caller wrote it;
   * `untranslated` is set when `body` left fields of it out: why only those offerings may take it.
   */
  native?: NativeRequest & { asked: Record<string, unknown>; untranslated?: string }
}

/** What a line sends; a message when the body no longer translates. */
export function lineRequest(parsed: {
  url: string
  body: Record<string, unknown>
}): LineRequest | { problem: string } {
  const asked = parsed.body
  if (parsed.url === RESPONSES_URL) {
    // OpenAI stores a response unless told not to; the gateway promises nothing is stored.
    const native = { api: 'responses' as const, body: { ...asked, store: false }, asked }
    return translated(native, (lenient) => convertResponsesToChat(asked, { lenient }))
  }
  if (parsed.url === MESSAGES_URL) {
    const native = { api: 'messages' as const, body: asked, asked }
    return translated(native, (lenient) => convertMessagesToChat(asked, { lenient }))
  }
  return { body: asked }
}

type Translation =
  { ok: true; body: Record<string, unknown> } | { ok: false; message: string; param: string }

/** The strict translation; outside its subset, the lenient one, kept to the native offerings. */
function translated(
  native: NonNullable<LineRequest['native']>,
  translate: (lenient: boolean) => Translation,
): LineRequest | { problem: string } {
  const strict = translate(false)
  if (strict.ok) return { body: strict.body, native }
  // Outside the subset: validation let it in for the model's offerings that speak its API.
  const lenient = translate(true)
  if (!lenient.ok) return { problem: `body.${lenient.param} ${lenient.message}` }
  const untranslated = `body.${strict.param} ${strict.message}`
  return { body: lenient.body, native: { ...native, untranslated } }
}

/**
 * The answer as stored: a Responses line's as its Response object, a Messages line's as its
 * message (never the upstream's text): the provider's own when the offering took the request as
 * it came, else translated from chat.
 */
export function answerFor(
  outcome: Answer,
  request: LineRequest,
  catalog: Pick<Catalog, 'provider'>,
  offering: Offering,
): Answer {
  const native = request.native
  if (!native) return outcome
  if (offeringSpeaks(catalog, offering, native.api)) return { ...outcome, text: undefined }
  return { ...outcome, text: undefined, body: fromChat(native, outcome.body) }
}

/** A chat completion in the shape of the API the line came in. */
export function fromChat(
  native: Pick<NonNullable<LineRequest['native']>, 'api' | 'asked'>,
  completion: Record<string, unknown>,
): Record<string, unknown> {
  if (native.api === 'responses') return convertChatToResponse(completion, native.asked)
  const model = native.asked.model
  return convertChatToMessage(completion, typeof model === 'string' ? model : undefined)
}
