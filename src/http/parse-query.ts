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
  const fields: Record<string, string> = {}
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
