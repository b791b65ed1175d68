/**
 * A batch line in a provider's own API — a Responses request (docs/clients/responses.md) or a
 * Message Batch's Messages request (docs/clients/anthropic-sdk.md) — as the chat body its rules
 * and ceiling are read from, by the live calls' rule (chatBodyFor, catalog/speaks-api.ts): the
 * translation for the common subset, or, outside it, the lenient one when the line's model has
 * an offering that takes the request as it came.
 */
import {
  convertMessagesToChat,
  type MessageOrigin,
} from '../../providers/anthropic/convert-messages-to-chat.ts'
import { convertResponsesToChat } from '../../providers/responses/convert-responses-to-chat.ts'
import { messagesNames } from '../../providers/anthropic/messages-path.ts'
import { problemInCallersTerms, type CallersNames } from './callers-names.ts'
import { RESPONSES_NAMES } from './responses-line.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { chatBodyFor } from '../catalog/speaks-api.ts'
import type { BodyProblem } from './issues.ts'
import { nestsDeeperThan } from './json-depth.ts'

/** The APIs a batch line can come in besides chat and embeddings. */
export type AskedApi = 'responses' | 'messages'

/** Why such a line cannot run, as the line's issue. */
export class TranslationProblem {
  constructor(readonly problem: BodyProblem) {}
}

/**
 * Per API, its translation and the fixes of its refusals: `outside` for a valid request outside
 * the subset translated, `invalid` for one its own API would refuse too (a missing max_tokens).
 */
const TRANSLATIONS = {
  responses: {
    translate: (body: Record<string, unknown>, lenient: boolean) =>
      convertResponsesToChat(body, { lenient }),
    outside:
      'send a Responses request within the subset a batch line translates (see the message), or a /v1/chat/completions line',
    invalid:
      'correct it as the message says: the Responses API request (docs/clients/responses.md)',
  },
  messages: {
    translate: (body: Record<string, unknown>, lenient: boolean) =>
      convertMessagesToChat(body, { lenient }),
    outside:
      'send a Messages request within the subset the gateway translates (see the message), or name a model with an Anthropic offering',
    invalid:
      'correct it as the message says: the Messages API request (docs/clients/anthropic-sdk.md)',
  },
}

/**
 * The body as the chat body it translates to, or with `lenient` the chat body that only prices
 * and routes it, fields outside the subset left out. `named` is told the caller's names for it.
 */
function asChat(
  api: AskedApi,
  body: unknown,
  lenient: boolean,
  named: (names: CallersNames) => void,
): unknown {
  // Not an object, or nested too deep to translate: validateBody says so in its own words.
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body
  if (nestsDeeperThan(body)) return body
  const translation = TRANSLATIONS[api]
  const converted = translation.translate(body as Record<string, unknown>, lenient)
  if (converted.ok) {
    // A Messages translation says where each chat message came from; a Responses one needs not.
    const origins = (converted as { origins?: MessageOrigin[] }).origins
    named(origins ? messagesNames(origins) : RESPONSES_NAMES)
    return converted.body
  }
  const path = converted.param ? `body.${converted.param}` : 'body'
  const fix = converted.outside ? translation.outside : translation.invalid
  return new TranslationProblem({ path, message: converted.message, fix })
}

/** What the validation of a line's chat body found, in the names of the API the line came in. */
export type InCallersTerms = (problem: BodyProblem) => BodyProblem

/**
 * A line's body as the chat body it is validated by: outside the translated subset,
 * `untranslated` is what is reported when the line's routing leaves no offering that takes it
 * as it came; `terms` names a problem of `chat` as the line's own field.
 */
export function askedAsChat(
  api: AskedApi,
  body: unknown,
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
):
  { chat: unknown; untranslated?: TranslationProblem; terms: InCallersTerms } | TranslationProblem {
  // The names of the translation the line goes by: the lenient one when the strict one failed.
  let names: CallersNames = api === 'responses' ? RESPONSES_NAMES : messagesNames([])
  const asked = chatBodyFor(
    catalog,
    { model: (body as { model?: unknown } | null)?.model, api },
    (lenient) => asChat(api, body, lenient, (found) => (names = found)),
    (translated): translated is TranslationProblem => translated instanceof TranslationProblem,
  )
  if (asked instanceof TranslationProblem) return asked
  return { ...asked, terms: (problem) => problemInCallersTerms(problem, names) }
}
