/** A batch line's Responses body (docs/clients/responses.md) as the chat body its rules and ceiling are read from. */
import { convertResponsesToChat } from '../../providers/responses/convert-responses-to-chat.ts'
import type { BodyProblem } from './issues.ts'
import { nestsDeeperThan } from './json-depth.ts'

/** Why a Responses body cannot run as a batch line, as the line's issue. */
export class ResponsesProblem {
  constructor(readonly problem: BodyProblem) {}
}

/**
 * `passedThrough`: every offering of the line's model serves the Responses API, which takes the
 * body as it came; only what can be priced and routed is read from it (the live rule,
 * catalog/responses-api.ts).
 */
export function responsesAsChat(
  body: unknown,
  passedThrough = false,
): Record<string, unknown> | ResponsesProblem | unknown {
  // Not an object, or nested too deep to translate: validateBody says so in its own words.
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body
  if (nestsDeeperThan(body)) return body
  const converted = convertResponsesToChat(body as Record<string, unknown>, {
    lenient: passedThrough,
  })
  if (converted.ok) return converted.body
  return new ResponsesProblem({
    path: converted.param ? `body.${converted.param}` : 'body',
    message: converted.message,
    fix: 'send a Responses request within the subset a batch line translates (see the message), or a /v1/chat/completions line',
  })
}

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
