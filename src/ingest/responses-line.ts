/** A batch line's Responses body (docs/clients/responses.md) as the chat body its rules and ceiling are read from. */
import { convertResponsesToChat } from '../../providers/responses/convert-responses-to-chat.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { chatBodyFor } from '../catalog/speaks-api.ts'
import type { BodyProblem } from './issues.ts'
import { nestsDeeperThan } from './json-depth.ts'

/** Why a Responses body cannot run as a batch line, as the line's issue. */
export class ResponsesProblem {
  constructor(readonly problem: BodyProblem) {}
}

/**
 * A Responses body as the chat body it translates to (the subset every offering takes), or with
 * `lenient` the chat body that only prices and routes it, fields outside the subset left out.
 */
export function responsesAsChat(
  body: unknown,
  lenient = false,
): Record<string, unknown> | ResponsesProblem | unknown {
  // Not an object, or nested too deep to translate: validateBody says so in its own words.
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body
  if (nestsDeeperThan(body)) return body
  const converted = convertResponsesToChat(body as Record<string, unknown>, { lenient })
  if (converted.ok) return converted.body
  return new ResponsesProblem({
    path: converted.param ? `body.${converted.param}` : 'body',
    message: converted.message,
    fix: 'send a Responses request within the subset a batch line translates (see the message), or a /v1/chat/completions line',
  })
}

/**
 * A Responses line's body as the chat body it is validated by, by the live calls' rule
 * (chatBodyFor, catalog/speaks-api.ts): outside the translated subset, `untranslated` is what is
 * reported when the line's routing leaves no offering that takes it as it came.
 */
export const responsesLineAsChat = (
  body: unknown,
  catalog: Pick<Catalog, 'find' | 'usable' | 'provider'>,
): { chat: unknown; untranslated?: ResponsesProblem } | ResponsesProblem =>
  chatBodyFor(
    catalog,
    { model: (body as { model?: unknown } | null)?.model, api: 'responses' },
    (lenient) => responsesAsChat(body, lenient),
    (translated): translated is ResponsesProblem => translated instanceof ResponsesProblem,
  )

/** Text about the translated chat body, with the chat fields under their Responses names. */
export const inResponsesNames = (text: string) =>
  text
    .replace(/\bmax_(completion_)?tokens\b/g, 'max_output_tokens')
    .replace(/\bresponse_format(\.json_schema)?\b/g, 'text.format')

/** A field of the translated chat body (`messages[2].content`), as the Responses body's field. */
export const responsesParam = (param: string) =>
  inResponsesNames(param.replace(/^messages\b.*/, 'input'))

/** A problem found in the translated chat body, named as the Responses body's field. */
export function inResponsesTerms(problem: BodyProblem): BodyProblem {
  return {
    ...problem,
    path: problem.path.startsWith('body.')
      ? `body.${responsesParam(problem.path.slice(5))}`
      : problem.path,
    message: inResponsesNames(problem.message),
    fix: inResponsesNames(problem.fix),
  }
}
