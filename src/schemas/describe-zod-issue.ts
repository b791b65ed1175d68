/**
 * One zod issue as a message and a fix a person can act on. A value of the wrong type is named
 * as wrong ("must be an integer; got a string"), never as missing: only an absent field "is
 * required". A value the caller sent appears only as a short excerpt (src/excerpt.ts).
 */
import type { z } from 'zod'
import { excerpt } from '../excerpt.ts'

export interface Described {
  path: string
  message: string
  fix: string
}

type Issue = z.core.$ZodIssue

/** Examples a fix may offer, by field name: what a valid value of that field looks like. */
const EXAMPLES: Record<string, string> = {
  messages: '[{"role": "user", "content": "hello"}]',
  content: '"hello"',
  max_tokens: '256',
  max_completion_tokens: '256',
  n: '1',
  temperature: '0.7',
  top_p: '1',
  seed: '42',
  stop: '["\\n\\n"]',
  tools:
    '[{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]',
  tool_choice: '"auto" or {"type": "function", "function": {"name": "get_weather"}}',
  logit_bias: '{"50256": -100}',
  response_format:
    '{"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}',
  json_schema: '{"name": "answer", "schema": {"type": "object"}}',
  custom_id: '"request-1"',
  input: '"hello"',
  body: '{"model": "…", "messages": [{"role": "user", "content": "hello"}]}',
}

/** A path segment is a caller's key when the object is a record (logit_bias, metadata). */
export const joinPath = (path: readonly PropertyKey[]) =>
  path.map((key) => excerpt(String(key))).join('.')

/** `root`: what the whole value is called when the issue is at it ("the line", "the body"). */
export function describeZodIssue(issue: Issue, prefix: string, root = 'the line'): Described {
  const path = [prefix, joinPath(issue.path)].filter(Boolean).join('.')
  const field = path || root
  const name = String(issue.path.at(-1) ?? '')
  const input = (issue as { input?: unknown }).input
  switch (issue.code) {
    case 'invalid_type':
      // zod names a wrong type of z.int() "number"; our integer fields say so (src/schemas/requests.ts).
      return describeWrongType(
        { path, field, name, input },
        issue.message === 'must be an integer' ? 'int' : issue.expected,
      )
    case 'too_big': {
      const max = String(issue.maximum)
      if (issue.origin === 'string') {
        return {
          path,
          message: `must be at most ${max} characters`,
          fix: `shorten ${field} to ${max} characters or fewer`,
        }
      }
      if (issue.origin === 'array') {
        return {
          path,
          message: `must have at most ${max} items`,
          fix: `send at most ${max} items in ${field}`,
        }
      }
      return { path, message: `must be at most ${max}`, fix: `set ${field} to ${max} or less` }
    }
    case 'too_small': {
      const min = String(issue.minimum)
      if (issue.origin === 'string') {
        return { path, message: `must not be empty`, fix: `set ${field} to a non-empty string` }
      }
      if (issue.origin === 'array') {
        return {
          path,
          message: `must have at least ${min} item${min === '1' ? '' : 's'}`,
          fix: `add at least ${min} item${min === '1' ? '' : 's'} to ${field}`,
        }
      }
      return { path, message: `must be at least ${min}`, fix: `set ${field} to ${min} or more` }
    }
    case 'invalid_value': {
      const values = issue.values.map((v) => JSON.stringify(v))
      const meant = pathMeant(input, issue.values)
      return {
        path,
        message: `must be ${values.length === 1 ? values[0] : `one of ${values.join(', ')}`}${got(input)}`,
        fix: `set ${field} to ${meant === null ? orList(values) : JSON.stringify(meant)}`,
      }
    }
    case 'unrecognized_keys': {
      // A strict object may be sent thousands of unknown keys: name a few, count the rest.
      const shown = issue.keys.slice(0, 5).map((key) => excerpt(key))
      const more =
        issue.keys.length > shown.length ? ` and ${issue.keys.length - shown.length} more` : ''
      return {
        path,
        message: `has unknown field${issue.keys.length > 1 ? 's' : ''} ${shown.join(', ')}${more}`,
        fix: `remove ${shown.join(', ')}${more}`,
      }
    }
    case 'invalid_union':
      return describeUnion(issue, { path, field, input }, prefix)
    case 'invalid_key': {
      const parent = joinPath(issue.path.slice(0, -1))
      const inner = issue.issues[0]
      // A key too long says so in the words a too long value does, not zod's.
      if (inner?.code === 'too_big' && inner.origin === 'string') {
        const max = String(inner.maximum)
        return {
          path,
          message: `is a key of more than ${max} characters`,
          fix: `shorten the key ${JSON.stringify(excerpt(name))} to ${max} characters or fewer`,
        }
      }
      const reason = inner?.message ?? 'is not accepted'
      const example = EXAMPLES[String(issue.path.at(-2) ?? '')]
      return {
        path,
        message: `is not an accepted key (${reason})`,
        fix: `rename or remove the key ${JSON.stringify(excerpt(name))}${example ? `; ${[prefix, parent].filter(Boolean).join('.')} looks like ${example}` : ''}`,
      }
    }
    case 'invalid_format':
      if (/NUL/.test(issue.message))
        return {
          path,
          message: issue.message,
          fix: `remove the NUL characters and unpaired surrogates from ${field}`,
        }
      if (issue.message.startsWith('must be ')) {
        return {
          path,
          message: `${issue.message}${got(input)}`,
          fix: `set ${field} to ${issue.message.slice('must be '.length)}`,
        }
      }
      return { path, message: issue.message, fix: `correct ${field}` }
    case 'custom': {
      // Our own refinements carry their wording (see src/schemas/whole-number.ts).
      const params = (issue.params ?? {}) as { expected?: string; example?: string; fix?: string }
      if (params.expected) {
        return {
          path,
          message: `must be ${params.expected}${got(input)}`,
          fix: `set ${field} to ${params.expected}, such as ${params.example}`,
        }
      }
      return { path, message: issue.message, fix: params.fix ?? `correct ${field}` }
    }
    default:
      return { path, message: issue.message, fix: `correct ${field}` }
  }
}

/** Where an issue is (its path, and the field as a message names it) and what was there. */
interface Spot {
  path: string
  field: string
  input: unknown
}

function describeWrongType(
  { path, field, name, input }: Spot & { name: string },
  expected: string,
): Described {
  const wanted = expectedName(expected)
  const example = EXAMPLES[name]
  if (input === undefined)
    return {
      path,
      message: 'is required',
      fix: `add ${field} (${wanted}${example ? `, such as ${example}` : ''})`,
    }
  if (typeof input === 'number' && !Number.isFinite(input)) {
    return {
      path,
      message: `must be a finite number; got a number too large to represent`,
      fix: `set ${field} to ${wanted} within range${example ? `, such as ${example}` : ''}`,
    }
  }
  if (expected === 'int' && typeof input === 'number') {
    return {
      path,
      message: `must be an integer; got ${input}`,
      fix: `set ${field} to a whole number${example ? `, such as ${example}` : ''}`,
    }
  }
  return {
    path,
    message: `must be ${wanted}; got ${kindOf(input)}`,
    fix: fixForType({ field, input }, { expected, wanted, example }),
  }
}

/** The fix for a wrong type: the value as it should be written when it is only quoted wrongly. */
function fixForType(
  { field, input }: Pick<Spot, 'field' | 'input'>,
  { expected, wanted, example }: { expected: string; wanted: string; example?: string },
) {
  if (typeof input === 'string') {
    const trimmed = input.trim()
    const asNumber = Number(trimmed)
    if (
      (expected === 'number' || (expected === 'int' && Number.isInteger(asNumber))) &&
      /^-?\d+(\.\d+)?$/.test(trimmed) &&
      trimmed.length <= 20
    ) {
      return `write ${field} as a number, without quotes: ${trimmed}`
    }
    if (expected === 'boolean' && (trimmed === 'true' || trimmed === 'false'))
      return `write ${field} as ${trimmed}, without quotes`
  }
  // A number in quotes is the string meant; true or false in quotes is rarely what a string field
  // takes (an amount, a name), so it gets the general fix.
  if (expected === 'string' && typeof input === 'number')
    return `write ${field} as a string, in quotes: "${input}"`
  return `set ${field} to ${wanted}${example ? `, such as ${example}` : ''}`
}

/**
 * A value that matched none of a union's shapes. Branches are judged by how far into the value
 * they got: when the furthest all failed on the type or value of the same spot, that spot "must be
 * A or B"; otherwise the furthest branch's own issue is the most useful one.
 */
function describeUnion(
  issue: Extract<Issue, { code: 'invalid_union' }>,
  { path, field, input }: Spot,
  prefix: string,
): Described {
  const discriminator = (issue as { discriminator?: string }).discriminator
  if (discriminator) {
    const options = ((issue as { options?: unknown[] }).options ?? []).map((v) => JSON.stringify(v))
    const value =
      typeof input === 'object' && input !== null
        ? (input as Record<string, unknown>)[discriminator]
        : undefined
    const at = path.endsWith(discriminator) ? path : [path, discriminator].filter(Boolean).join('.')
    return {
      path: at,
      message:
        value === undefined ? 'is required' : `must be one of ${options.join(', ')}${got(value)}`,
      fix: `set ${at} to ${orList(options)}`,
    }
  }
  const firsts = issue.errors.map((branch) => branch[0]).filter((i): i is Issue => i !== undefined)
  if (firsts.length === 0)
    return {
      path,
      message: 'has none of the accepted shapes',
      fix: `check ${field} against the endpoint's documented request format`,
    }
  const depth = Math.max(...firsts.map((i) => i.path.length))
  const furthest = firsts.filter((i) => i.path.length === depth)
  const samePlace = furthest.every((i) => joinPath(i.path) === joinPath(furthest[0].path))
  if (
    furthest.length > 1 &&
    samePlace &&
    furthest.every((i) => i.code === 'invalid_type' || i.code === 'invalid_value')
  ) {
    const at = [path, joinPath(furthest[0].path)].filter(Boolean).join('.')
    const name = String([...issue.path, ...furthest[0].path].at(-1) ?? '')
    const value = (furthest[0] as { input?: unknown }).input
    const wanted = [
      ...new Set(
        furthest.flatMap((i) =>
          i.code === 'invalid_type'
            ? [expectedName(i.expected)]
            : i.code === 'invalid_value'
              ? i.values.map((v) => JSON.stringify(v))
              : [],
        ),
      ),
    ]
    const example = EXAMPLES[name]
    if (value === undefined)
      return { path: at, message: 'is required', fix: `add ${at} (${orList(wanted)})` }
    return {
      path: at,
      // Named as a wrong type names it ("got a number"); beside accepted values, the value itself.
      message: `must be ${orList(wanted)}; got ${furthest.every((i) => i.code === 'invalid_type') ? kindOf(value) : shown(value)}`,
      fix: `set ${at} to ${orList(wanted)}${example ? `, such as ${example}` : ''}`,
    }
  }
  // A branch that got past the type check (an array, but too long) says more than one that did not.
  const inner = furthest.find((i) => i.code !== 'invalid_type') ?? furthest[0]
  return describeZodIssue({ ...inner, path: [...issue.path, ...inner.path] } as Issue, prefix)
}

function expectedName(expected: string) {
  switch (expected) {
    case 'int':
      return 'an integer'
    case 'boolean':
      return 'true or false'
    case 'record':
    case 'object':
      return 'an object'
    // Any value but none (a line's body, z.unknown()): what it must be is the endpoint's request.
    case 'nonoptional':
      return "the request for the line's url, a JSON object"
    default:
      return /^[aeiou]/.test(expected) ? `an ${expected}` : `a ${expected}`
  }
}

/** "; got …" naming what the caller sent, short: a type, a number, or an excerpt of a string. */
function got(value: unknown) {
  return value === undefined ? '' : `; got ${shown(value)}`
}

function shown(value: unknown) {
  if (typeof value === 'string') return JSON.stringify(excerpt(value))
  if (typeof value === 'number')
    return Number.isFinite(value) ? String(value) : 'a number too large to represent'
  if (typeof value === 'boolean') return String(value)
  return kindOf(value)
}

/** What kind of JSON value this is, with its article: "a string", "an array", "null". */
export function kindOf(value: unknown) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  switch (typeof value) {
    case 'object':
      return 'an object'
    case 'boolean':
      return 'a boolean'
    default:
      return /^[aeiou]/.test(typeof value) ? `an ${typeof value}` : `a ${typeof value}`
  }
}

/**
 * The one allowed path that the value sent is part of, or has as its end: `/chat/completions`
 * (the path of an OpenAI SDK's base URL, without its `/v1`) or a full
 * `https://api.openai.com/v1/chat/completions` both mean `/v1/chat/completions`. null: no path
 * was sent, or it matches none or several.
 */
function pathMeant(input: unknown, values: readonly unknown[]): string | null {
  if (typeof input !== 'string' || !input.includes('/')) return null
  const path = input.replace(/\/+$/, '')
  if (path.length < 2) return null
  const near = values.filter(
    (v): v is string => typeof v === 'string' && (v.endsWith(path) || path.endsWith(v)),
  )
  return near.length === 1 ? near[0]! : null
}

function orList(items: string[]) {
  return items.length <= 1
    ? (items[0] ?? '')
    : `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`
}
