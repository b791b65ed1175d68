/**
 * The error envelope every refusal is answered with (docs/errors.md), and Anthropic's shape of it
 * under /anthropic (docs/clients/anthropic-sdk.md), as zod schemas. The types and codes are read
 * from REFUSALS, the one table of refusals, so the schema cannot name one that is not answered.
 */
import { z } from 'zod'
import { REFUSALS } from '../errors.ts'

const kinds = Object.entries(REFUSALS) as [string, { type: string; code?: string }][]
const ERROR_TYPES = [...new Set(kinds.map(([, kind]) => kind.type))] as [string, ...string[]]
/** The wire's `error.code` of every refusal. */
export const REFUSAL_WIRE_CODES = [...new Set(kinds.map(([name, kind]) => kind.code ?? name))] as [
  string,
  ...string[],
]

/** A problem of a refused batch file (docs/native-api.md "A file with problems"). */
export const issueSchema = z.looseObject({
  line: z.int(),
  custom_id: z.string().nullable().optional(),
  path: z.string(),
  message: z.string(),
  fix: z.string(),
})

export const errorEnvelopeSchema = z
  .looseObject({
    error: z
      .looseObject({
        message: z.string(),
        type: z.enum(ERROR_TYPES),
        param: z.string().nullable(),
        code: z.enum(REFUSAL_WIRE_CODES),
      })
      .describe('extra fields name a limit: `limit`, `limit_bytes`'),
    issues: z.array(issueSchema).optional(),
    issues_omitted: z.int().min(0).optional(),
  })
  .describe('Every refusal (docs/errors.md).')

/** Under /anthropic: Anthropic's envelope, the native code and param kept inside `error`. */
export const anthropicErrorSchema = z
  .looseObject({
    type: z.literal('error'),
    error: z.looseObject({ type: z.string(), message: z.string() }),
  })
  .describe("Anthropic's error shape (docs/clients/anthropic-sdk.md).")
