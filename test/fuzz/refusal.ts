/** What a proper refusal of bad input looks like, as a list of what an answer got wrong. */
import type { BadSubmission } from './bad-input-corpus.ts'

interface ErrorAnswer {
  error: { message: string; type: string; code: string | null }
  issues?: { line: number; custom_id: string | null; path: string; message: string; fix: string }[]
  issues_omitted?: number
}

/** What is wrong with an answer to a malformed request; empty when it is a proper refusal. */
export function refusalProblems(
  status: number,
  text: string,
  expected: Partial<BadSubmission> = {},
) {
  const problems: string[] = []
  if (status < 400 || status > 499) problems.push(`status ${status}, not a 4xx`)
  if (expected.status !== undefined && status !== expected.status) {
    problems.push(`status ${status}, expected ${expected.status}`)
  }
  let body: ErrorAnswer
  try {
    body = JSON.parse(text) as ErrorAnswer
  } catch {
    return [...problems, `body is not JSON: ${text.slice(0, 120)}`]
  }
  const error = body.error
  if (!error || typeof error.message !== 'string' || error.message.length < 10) {
    problems.push(`no clear message: ${text.slice(0, 200)}`)
    return problems
  }
  if (typeof error.type !== 'string') problems.push('error.type missing')
  if (expected.code !== undefined && error.code !== expected.code) {
    problems.push(`code ${error.code}, expected ${expected.code}`)
  }
  if (error.code === 'invalid_batch_file') {
    const issues = body.issues ?? []
    if (issues.length === 0) problems.push('invalid_batch_file without issues')
    for (const issue of issues) {
      if (!Number.isInteger(issue.line) || issue.line < 1) problems.push(`issue line ${issue.line}`)
      if (!issue.message || !issue.fix)
        problems.push(`issue without message or fix: ${JSON.stringify(issue)}`)
    }
    if (expected.line !== undefined && issues[0]?.line !== expected.line) {
      problems.push(
        `first issue on line ${issues[0]?.line}, expected ${expected.line}: ${issues[0]?.message}`,
      )
    }
  }
  return problems
}
