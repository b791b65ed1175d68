/** A batch line's Responses body (docs/clients/responses.md) as the chat body its rules and ceiling are read from. */
import { convertResponsesToChat } from '../../providers/responses/convert-responses-to-chat.ts'
import type { BodyProblem } from './issues.ts'
import { nestsDeeperThan } from './json-depth.ts'

/** Why a Responses body cannot run as a batch line, as the line's issue. */
export class ResponsesProblem {
  constructor(readonly problem: BodyProblem) {}
}

export function responsesAsChat(
  body: unknown,
): Record<string, unknown> | ResponsesProblem | unknown {
  // Not an object, or nested too deep to translate: validateBody says so in its own words.
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body
  if (nestsDeeperThan(body)) return body
  const converted = convertResponsesToChat(body as Record<string, unknown>)
  if (converted.ok) return converted.body
  return new ResponsesProblem({
    path: converted.param ? `body.${converted.param}` : 'body',
    message: converted.message,
    fix: 'send a Responses request within the subset a batch line translates (see the message), or a /v1/chat/completions line',
  })
}

/** A problem found in the translated chat body, named as the Responses body's field. */
export function inResponsesTerms(problem: BodyProblem): BodyProblem {
  const rename = (text: string) =>
    text
      .replace(/\bmax_(completion_)?tokens\b/g, 'max_output_tokens')
      .replace(/\bresponse_format\b/g, 'text.format')
  const path = problem.path.replace(/^body\.messages\b.*/, 'body.input')
  return {
    ...problem,
    path: rename(path),
    message: rename(problem.message),
    fix: rename(problem.fix),
  }
}
