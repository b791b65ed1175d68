/**
 * How a provider's own API (the Responses API, Anthropic's Messages) names the fields of the chat
 * body its requests translate to, so that a problem found in that chat body is told in the
 * caller's terms: the fields the caller sent, never chat fields it did not.
 */
import type { BodyProblem } from './issues.ts'

/** One API's names for the translated chat body's fields: in a message's text, and as a path. */
export interface CallersNames {
  text: (text: string) => string
  param: (param: string) => string
}

/** A problem found in the translated chat body, its `body.…` path and its words in `names`. */
export function problemInCallersTerms(problem: BodyProblem, names: CallersNames): BodyProblem {
  return {
    ...problem,
    path: problem.path.startsWith('body.')
      ? `body.${names.param(problem.path.slice(5))}`
      : problem.path,
    message: names.text(problem.message),
    fix: names.text(problem.fix),
  }
}
