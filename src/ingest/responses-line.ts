/**
 * A Responses batch line's problems in its own terms (docs/clients/responses.md): what validation found
 * in the chat body it translates to (asked-as-chat.ts), named as the Responses body's fields.
 */
import type { BodyProblem } from './issues.ts'
import { problemInCallersTerms, type CallersNames } from './callers-names.ts'

/** Text about the translated chat body, with the chat fields under their Responses names. */
export const inResponsesNames = (text: string) =>
  text
    .replace(/\bmax_tokens \(or max_completion_tokens\)/g, 'max_output_tokens')
    .replace(/\bmax_(completion_)?tokens\b/g, 'max_output_tokens')
    // A schema format as chat nests it, {"type": "json_schema", "json_schema": {"name", "schema"}},
    // is flat in text.format. For the fixes check-structured.ts writes, whose json_schema object
    // ends with its schema ({…}}}); one with a field after the schema would need a parser.
    .replace(
      /\{"type": "json_schema", "json_schema": \{(.*?\})\}\}/g,
      '{"type": "json_schema", $1}',
    )
    .replace(/\bresponse_format(\.json_schema)?\b/g, 'text.format')
    // Where a message names the schema by chat's place for it, it is text.format's `schema`.
    .replace(/\bjson_schema\.schema\b/g, 'schema')
    // The endpoint the caller called.
    .replace(/\/v1\/chat\/completions\b/g, '/v1/responses')

/** A field of the translated chat body (`messages[2].content`), as the Responses body's field. */
export const responsesParam = (param: string) =>
  inResponsesNames(param.replace(/^messages\b.*/, 'input'))

/** The Responses body's names for the translated chat body's fields. */
export const RESPONSES_NAMES: CallersNames = { text: inResponsesNames, param: responsesParam }

/** A problem found in the translated chat body, named as the Responses body's field. */
export const inResponsesTerms = (problem: BodyProblem) =>
  problemInCallersTerms(problem, RESPONSES_NAMES)
