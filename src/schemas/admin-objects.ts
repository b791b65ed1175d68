/**
 * The admin API's answers (docs/operations.md "Accounts, credit and keys") as zod schemas: the
 * renderers in render-admin.ts return these types, and GET /openapi.json publishes them.
 */
import { z } from 'zod'
import { ALL_SCOPES } from '../domain.ts'
import { usdText } from './native-objects.ts'

const seconds = z.int().min(0).describe('Unix seconds')
const count = z.int().min(0)

export const accountSchema = z.strictObject({
  id: z.string(),
  object: z.literal('account'),
  name: z.string(),
  balance_usd: usdText,
  held_usd: usdText,
  available_usd: usdText,
  open_batches: count,
  max_open_batches: count,
  rate_limit_per_minute: count,
  max_files: count,
  max_stored_bytes: count,
  files_in_use: count,
  stored_bytes: count,
  daily_spend_limit_usd: usdText.nullable(),
  daily_spend_used_usd: usdText,
  created_at: seconds,
})
export type AccountObject = z.infer<typeof accountSchema>

export const apiKeySchema = z.strictObject({
  id: z.string(),
  object: z.literal('api_key'),
  account_id: z.string(),
  name: z.string().nullable(),
  prefix: z.string().describe('the first characters of the key, safe to show'),
  scopes: z.array(z.enum(ALL_SCOPES as [string, ...string[]])),
  rate_limit_per_minute: count.nullable(),
  created_at: seconds,
  revoked_at: seconds.nullable(),
})
export type ApiKeyObject = z.infer<typeof apiKeySchema>

/** The create's answer: the one time the key itself is shown. */
export const apiKeyCreatedSchema = apiKeySchema.extend({ key: z.string() })

/** A fine-tune as a model object with what the operator set (docs/open-models.md). */
export const fineTuneSchema = z.strictObject({
  id: z.string(),
  object: z.literal('model'),
  created: seconds,
  owned_by: z.string(),
  parent: z.string(),
  status: z.enum(['active', 'inactive']),
  account_id: z.string(),
  name: z.string(),
  rank: z.int().min(1),
  size_mib: z.int().min(1),
  source: z.string(),
  created_at: seconds,
  deactivated_at: seconds.nullable(),
})
export type FineTuneObject = z.infer<typeof fineTuneSchema>

export const fineTuneListSchema = z.strictObject({
  object: z.literal('list'),
  data: z.array(fineTuneSchema),
})
