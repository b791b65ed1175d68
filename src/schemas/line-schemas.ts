/**
 * The native file's input line and result line (docs/native-api.md) as zod schemas, published as
 * JSON Schemas in docs/schemas/ for people who generate or check files with other tools. The
 * input line reuses the request schemas the gateway validates with; the result line is what
 * render-native.ts writes. `npm run schemas` writes the files; a test keeps them equal to these
 * and checks a real batch's results against the result schema.
 */
import { z } from 'zod'
import { BATCH_URLS, LINE_STATUSES } from '../domain.ts'
import { chatBodySchema, embeddingsBodySchema } from './requests.ts'

/** A Responses API request (docs/clients/responses.md); its fields are checked on translation. */
export const responsesBodySchema = z.looseObject({ model: z.string().min(1), input: z.unknown() })

/** One line of a file sent to `POST /v1/batches`. */
export const inputLineSchema = z
  .strictObject({
    custom_id: z.string().min(1).max(128).describe('unique in the file; 128 characters at most'),
    method: z.literal('POST'),
    url: z.enum(BATCH_URLS).describe('the same on every line of a file'),
    body: z.union([chatBodySchema, embeddingsBodySchema, responsesBodySchema]),
  })
  .describe('A line of a native batch file (JSONL): one request.')

const decimalUsd = z.string().regex(/^\d+(\.\d+)?$/)

/** One line of `GET /v1/batches/{id}/results`, in submitted order. */
export const resultLineSchema = z
  .strictObject({
    custom_id: z.string(),
    line: z.number().int().min(1).describe('the input line number, blank lines counted'),
    status: z.enum(LINE_STATUSES),
    response: z
      .strictObject({
        status_code: z.number().int(),
        body: z.record(z.string(), z.unknown()).describe("the endpoint's normal response"),
      })
      .nullable(),
    error: z
      .looseObject({
        code: z.string(),
        message: z.string(),
        upstream: z.unknown().optional(),
      })
      .nullable(),
    cost_usd: decimalUsd.optional().describe('absent while the line is pending or running'),
    provider: z.string().nullable().optional(),
    attempts: z.number().int().min(0).optional(),
    latency_ms: z.number().int().min(0).nullable().optional(),
  })
  .describe('A line of the results of a native batch.')

/** The published documents, by file name under docs/schemas/. */
export function lineJsonSchemas(): Record<string, unknown> {
  const published = (schema: z.ZodType, title: string) => ({
    title,
    ...z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }),
  })
  return {
    'native-input-line.schema.json': published(inputLineSchema, 'Multigrid native input line'),
    'native-result-line.schema.json': published(resultLineSchema, 'Multigrid native result line'),
  }
}
