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

export const MAX_ISSUES = 25

export { describeZodIssue, joinPath, kindOf } from './describe-zod-issue.ts'
