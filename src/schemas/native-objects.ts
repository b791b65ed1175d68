/**
 * The native API's answers (docs/native-api.md, docs/events-and-webhooks.md, docs/operations.md) as
 * zod schemas: the batch object, its quote, a page of a list, the usage report and the webhook
 * objects. The renderers' return types are inferred from these, so a field the renderer adds or
 * drops is a type error; GET /openapi.json publishes them, and a test checks real answers
 * against the published document.
 */
import { z } from 'zod'
import { BATCH_STATUSES, BATCH_ENDPOINTS, WAITING_CODES, WEBHOOK_EVENT_TYPES } from '../domain.ts'

/** Money on the wire: a decimal string in USD, never a float (docs/money-and-limits.md). */
export const usdText = z
  .string()
  .regex(/^-?\d+(\.\d+)?$/)
  .describe('USD as a decimal string')

const seconds = z.int().min(0).describe('Unix seconds')
const count = z.int().min(0)

/** `waiting`: why a batch is not moving (docs/routing.md); null while its lines progress. */
export const waitingSchema = z
  .strictObject({
    code: z.enum(WAITING_CODES),
    message: z.string(),
    until: seconds.optional().describe('when the wait is known to end, where it is known'),
  })
  .nullable()

/** `routing`: where the lines went, per provider, and the planner's projected finish. */
export const routingViewSchema = z.strictObject({
  providers: z.record(
    z.string(),
    z.strictObject({
      succeeded: count,
      failed: count,
      running: count,
      cost_usd: usdText,
      provider_batches: count
        .optional()
        .describe(
          "a batch lane's provider batches its running lines wait in (docs/batch-lanes.md)",
        ),
      fallback_at: seconds
        .optional()
        .describe('when the live lanes take over the lines those batches have not ended'),
    }),
  ),
  eta: seconds.nullable().describe("the planner's projected finish; null before it can tell"),
})

/** A batch refused on the OpenAI surface keeps its validation errors (docs/openai-facade.md). */
export const batchErrorEntrySchema = z.strictObject({
  code: z.string(),
  message: z.string(),
  param: z.string().nullable(),
  line: z.int().nullable(),
})

export const requestCountsSchema = z.strictObject({
  total: count,
  pending: count,
  running: count,
  succeeded: count,
  failed: count,
  cancelled: count,
  expired: count,
})

export type RoutingView = z.infer<typeof routingViewSchema>

/** The native batch object (docs/native-api.md "The batch object"). */
export const batchObjectSchema = z
  .strictObject({
    id: z.string(),
    object: z.literal('batch'),
    name: z.string().nullable(),
    endpoint: z.enum(BATCH_ENDPOINTS),
    status: z.enum(BATCH_STATUSES),
    completion_window_hours: z.int().min(1),
    created_at: seconds,
    deadline_at: seconds,
    started_at: seconds.nullable(),
    finished_at: seconds.nullable(),
    line_count: count,
    request_counts: requestCountsSchema,
    cost_ceiling_usd: usdText,
    cost_usd: usdText,
    usage: z.strictObject({
      input_tokens: count,
      cached_input_tokens: count,
      cache_write_tokens: count,
      output_tokens: count,
    }),
    max_cost_usd: usdText.nullable(),
    routing: routingViewSchema,
    waiting: waitingSchema,
    errors: z.array(batchErrorEntrySchema).nullable(),
    results_url: z.string(),
    parent_batch_id: z.string().nullable(),
    retried_by: z.array(z.string()),
  })
  .describe('A native batch (docs/native-api.md).')
export type BatchObject = z.infer<typeof batchObjectSchema>

/** `POST /v1/batches?dry_run=true`: what the batch would be (docs/native-api.md). */
export const batchQuoteSchema = z.strictObject({
  object: z.literal('batch.quote'),
  dry_run: z.literal(true),
  line_count: count,
  cost_ceiling_usd: usdText,
  max_cost_usd: usdText.nullable(),
  available_usd: usdText,
  credit_sufficient: z.boolean(),
  /** The hold within the account's daily spend limit today; true without a limit. */
  daily_limit_sufficient: z.boolean(),
  warnings: z.array(z.looseObject({})),
  warnings_omitted: count,
})

/** One page of a cursor-paginated list (render-page.ts): `after` last_id asks for the next. */
export const pageOf = <T extends z.ZodType>(item: T) =>
  z.strictObject({
    object: z.literal('list'),
    data: z.array(item),
    first_id: z.string().nullable(),
    last_id: z.string().nullable(),
    has_more: z.boolean(),
  })

/** One row of `GET /v1/usage`: the grouping's key (`start`, `model` or `provider`), the others absent. */
export const usageBucketSchema = z.strictObject({
  start: z.string().optional().describe('the UTC day, with group_by=day'),
  model: z.string().optional(),
  provider: z.string().optional(),
  lines: count,
  live_calls: count,
  input_tokens: count,
  cached_input_tokens: count,
  output_tokens: count,
  cost_usd: usdText,
})
export type UsageBucketObject = z.infer<typeof usageBucketSchema>

export const usageReportSchema = z.strictObject({
  object: z.literal('list'),
  data: z.array(usageBucketSchema),
})

/** A webhook as answered: never its secret, but in the create's answer. */
export const webhookSchema = z.strictObject({
  id: z.string(),
  object: z.literal('webhook'),
  url: z.string(),
  events: z.array(z.enum(WEBHOOK_EVENT_TYPES)),
  created_at: seconds,
  status: z.enum(['enabled', 'disabled']),
  disabled_at: seconds.nullable(),
})
export type WebhookObject = z.infer<typeof webhookSchema>

/** The create's answer, the only one with the signing secret (docs/events-and-webhooks.md). */
export const webhookCreatedSchema = webhookSchema.extend({ secret: z.string() })

export const webhookDeletedSchema = z.strictObject({
  id: z.string(),
  object: z.literal('webhook.deleted'),
  deleted: z.literal(true),
})

export const webhookDeliverySchema = z.strictObject({
  object: z.literal('webhook.delivery'),
  webhook_id: z.string(),
  event_id: z.string(),
  event_type: z.enum(WEBHOOK_EVENT_TYPES),
  batch_id: z.string(),
  status: z.string(),
  attempts: count,
  last_status_code: z.int().nullable(),
  last_error: z.string().nullable(),
  created_at: seconds,
  last_attempt_at: seconds.nullable(),
  next_attempt_at: seconds.nullable(),
  delivered_at: seconds.nullable(),
})
export type WebhookDeliveryObject = z.infer<typeof webhookDeliverySchema>

/** OpenAI's model object, with the catalog's endpoints, limits and prices (`GET /v1/models/{id}`). */
export const modelSchema = z.looseObject({
  id: z.string(),
  object: z.literal('model'),
  created: z.int(),
  owned_by: z.string(),
})

/** `GET /v1/models`: the model objects. */
export const modelListSchema = z.strictObject({
  object: z.literal('list'),
  data: z.array(modelSchema),
})

/** `GET /healthz` and `GET /readyz`. */
export const healthSchema = z.looseObject({ status: z.string() })
