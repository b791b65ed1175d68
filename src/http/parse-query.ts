/** Query strings through a zod schema, refused with a 400 that names the parameter. */
import type { z } from 'zod'
import { badRequest } from '../errors.ts'
import { describeZodIssue } from '../ingest/issues.ts'

export function parseQuery<S extends z.ZodType>(schema: S, url: string): z.output<S> {
  const params = Object.fromEntries(new URL(url).searchParams)
  const parsed = schema.safeParse(params)
  if (parsed.success) return parsed.data
  const issue = describeZodIssue(parsed.error.issues[0], '')
  throw badRequest(`query parameter ${issue.path} ${issue.message}; ${issue.fix}`, issue.path)
}
