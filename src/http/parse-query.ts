/** Query strings and form fields through a zod schema, refused with a 400 that names the field. */
import type { z } from 'zod'
import { badRequest } from '../errors.ts'
import { excerpt } from '../excerpt.ts'
import { describeZodIssue } from '../ingest/issues.ts'

/**
 * The fields as `schema` reads them, or the refusal of the first bad one: "<field> must be …;
 * <fix>", after `what` ("query parameter"). The dashboard's forms use this too, so a form field is
 * held to the same rule and refused in the same words as the API parameter it stands for.
 */
export function parseFields<S extends z.ZodType>(
  schema: S,
  fields: Record<string, string>,
  what = '',
): z.output<S> {
  const parsed = schema.safeParse(fields, { reportInput: true })
  if (parsed.success) return parsed.data
  const issue = describeZodIssue(parsed.error.issues[0], '')
  throw badRequest(
    `${what ? `${what} ` : ''}${issue.path} ${issue.message}; ${issue.fix}`,
    issue.path,
  )
}

export function parseQuery<S extends z.ZodType>(schema: S, url: string): z.output<S> {
  return parseFields(schema, queryFields(new URL(url).searchParams), 'query parameter')
}

/**
 * The query's parameters by name, each given once: a repeated one is refused rather than one of
 * its values taken (`dry_run=true&dry_run=false` once stored a batch, the last value winning).
 */
export function queryFields(params: URLSearchParams): Record<string, string> {
  // No prototype: `?__proto__=1` is a field like any other, which the checks see.
  const fields: Record<string, string> = Object.create(null)
  for (const [name, value] of params) {
    if (Object.hasOwn(fields, name)) {
      const shown = excerpt(name)
      throw badRequest(
        `query parameter ${shown} is given more than once; send it once, with the one value you mean`,
        shown,
      )
    }
    fields[name] = value
  }
  return fields
}

/**
 * Refuses a parameter `names` does not hold, naming the one it most likely means: on a route
 * where a parameter changes what is done or spent (a submit), a typo must not pass unnoticed
 * (`?dryrun=true` once stored and held a batch instead of quoting it).
 */
export function refuseUnknownFields(
  fields: Record<string, string>,
  names: readonly string[],
  what: string,
): void {
  for (const name of Object.keys(fields)) {
    if (names.includes(name)) continue
    const shown = excerpt(name)
    const meant = likelyMeant(name, names)
    throw badRequest(
      `unknown ${what} ${shown}; ${meant ? `did you mean ${meant}? This` : 'this'} route takes ${names.join(', ')}`,
      shown,
    )
  }
}

/** Words people bring from other APIs for a parameter this one names otherwise. */
const SYNONYMS: Record<string, string> = {
  deadline: 'completion_window_hours',
  window: 'completion_window_hours',
  status: 'filter',
}

/**
 * The name `typed` stands for: the same letters and digits, a word other APIs use for it
 * (`deadline`), the start of one (`max_cost`), or one or two edits away.
 */
export function likelyMeant(typed: string, names: readonly string[]): string | null {
  const plain = (text: string) => text.toLowerCase().replace(/[^a-z0-9]/g, '')
  const exact = names.find((name) => plain(name) === plain(typed))
  if (exact) return exact
  const synonym = SYNONYMS[plain(typed)]
  if (synonym && names.includes(synonym)) return synonym
  const start =
    plain(typed).length >= 4 && names.find((name) => plain(name).startsWith(plain(typed)))
  if (start) return start
  let best: { name: string; distance: number } | null = null
  for (const name of names) {
    const distance = editDistance(plain(typed), plain(name))
    if (distance <= 2 && (!best || distance < best.distance)) best = { name, distance }
  }
  return best?.name ?? null
}

/** Levenshtein distance, for names of a few dozen characters (a longer one is no near miss). */
function editDistance(a: string, b: string): number {
  if (a.length > 64 || b.length > 64) return Infinity
  let previous = Array.from({ length: b.length + 1 }, (_, i) => i)
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++)
      row[j] = Math.min(
        previous[j]! + 1,
        row[j - 1]! + 1,
        previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1),
      )
    previous = row
  }
  return previous[b.length]!
}
