/** Line-numbered validation issues, each saying what is wrong and what to send instead. */
export interface Issue {
  line: number
  custom_id: string | null
  /** Dotted path inside the line's JSON ("body.messages.0.role"); "" for the line itself. */
  path: string
  message: string
  fix: string
  /** Set when the issue has a code of its own (`model_not_found`); absent, it is a plain invalid request. */
  code?: string
}

/** What is wrong with one field of a body (or, as a warning, what may go wrong), and what to do. */
export interface BodyProblem {
  path: string
  message: string
  fix: string
  /** A code of its own (`model_not_found`), when the problem has one. */
  code?: string
}

/**
 * Something a dry run points out about a valid line (docs/open-models.md: a schema that recurses without
 * end): the line is admitted as it is. `param` is the field's dotted path, as in `issues`.
 */
export interface Warning {
  line: number
  custom_id: string | null
  param: string
  message: string
  fix: string
}

/** What most often makes hand-written JSON invalid, said wherever JSON is refused as not JSON. */
export const COMMON_JSON_MISTAKES = 'a trailing comma or an unquoted name is a common cause'

export const MAX_ISSUES = 25
/** At most this many warnings are listed; the rest are counted. */
export const MAX_WARNINGS = 25

export { describeZodIssue, joinPath, kindOf } from '../schemas/describe-zod-issue.ts'
