/** Line-numbered validation issues, each saying what is wrong and what to send instead. */
import type { z } from 'zod'

export interface Issue {
  line: number
  custom_id: string | null
  /** Dotted path inside the line's JSON ("body.messages.0.role"); "" for the line itself. */
  path: string
  message: string
  fix: string
}

export const MAX_ISSUES = 25

export const joinPath = (path: readonly PropertyKey[]) => path.map(String).join('.')

/** Turns one zod issue into a message and a fix a person can act on. */
export function describeZodIssue(issue: z.core.$ZodIssue, prefix: string): { path: string; message: string; fix: string } {
  const path = [prefix, joinPath(issue.path)].filter(Boolean).join('.')
  const field = path || 'the line'
  switch (issue.code) {
    case 'invalid_type':
      if (issue.input === undefined) {
        return { path, message: `is required`, fix: `add ${field} (${issue.expected})` }
      }
      return {
        path,
        message: `must be ${article(issue.expected)}, got ${typeName(issue.input)}`,
        fix: `set ${field} to ${article(issue.expected)}`,
      }
    case 'too_big': {
      const max = String(issue.maximum)
      if (issue.origin === 'string') {
        return { path, message: `must be at most ${max} characters`, fix: `shorten ${field} to ${max} characters or fewer` }
      }
      if (issue.origin === 'array') {
        return { path, message: `must have at most ${max} items`, fix: `send at most ${max} items in ${field}` }
      }
      return { path, message: `must be at most ${max}`, fix: `set ${field} to ${max} or less` }
    }
    case 'too_small': {
      const min = String(issue.minimum)
      if (issue.origin === 'string') {
        return { path, message: `must not be empty`, fix: `set ${field} to a non-empty string` }
      }
      if (issue.origin === 'array') {
        return { path, message: `must have at least ${min} item${min === '1' ? '' : 's'}`, fix: `add at least ${min} item${min === '1' ? '' : 's'} to ${field}` }
      }
      return { path, message: `must be at least ${min}`, fix: `set ${field} to ${min} or more` }
    }
    case 'invalid_value':
      return {
        path,
        message: `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}`,
        fix: `set ${field} to ${issue.values.map((v) => JSON.stringify(v)).join(' or ')}`,
      }
    case 'unrecognized_keys':
      return {
        path,
        message: `has unknown field${issue.keys.length > 1 ? 's' : ''} ${issue.keys.join(', ')}`,
        fix: `remove ${issue.keys.join(', ')}`,
      }
    case 'invalid_union': {
      const discriminator = (issue as { discriminator?: string }).discriminator
      if (discriminator) {
        return {
          path: path.endsWith(discriminator) ? path : [path, discriminator].filter(Boolean).join('.'),
          message: `has an unknown or missing "${discriminator}"`,
          fix: `set ${discriminator} to a valid value (for messages: system, developer, user, assistant or tool)`,
        }
      }
      return { path, message: 'has none of the accepted shapes', fix: `check ${field} against the endpoint's documented request format` }
    }
    case 'invalid_format':
      return { path, message: issue.message, fix: `remove the offending characters from ${field}` }
    default:
      return { path, message: issue.message, fix: `correct ${field}` }
  }
}

function article(type: string) {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`
}

export function typeName(value: unknown) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  return typeof value === 'object' ? 'an object' : typeof value
}
