/**
 * What the facades answer, as zod schemas: OpenAI's Batch and File objects as /openai/v1 renders
 * them (OpenAI's published schemas, plus the deviations docs/openai-facade.md names: `model` may be
 * null, and the `multigrid` object), and Anthropic's Message Batch objects under /anthropic
 * (docs/clients/anthropic-sdk.md). The renderers return these types; GET /openapi.json publishes them.
 */
import { z } from 'zod'
import { BATCH_STATUSES, BATCH_ENDPOINTS } from '../domain.ts'
import {
  batchErrorEntrySchema,
  routingViewSchema,
  usdText,
  waitingSchema,
} from './native-objects.ts'

const seconds = z.int().min(0).describe('Unix seconds')
const count = z.int().min(0)

/** OpenAI's `usage` of a batch, summed over the answers recorded so far. */
export const openAiBatchUsageSchema = z.strictObject({
  input_tokens: count,
  input_tokens_details: z.strictObject({ cached_tokens: count }),
  output_tokens: count,
  output_tokens_details: z.strictObject({ reasoning_tokens: count }),
  total_tokens: count,
})

/** Multigrid's own view of a facade batch: why it waits, where its lines went, what it costs. */
export const facadeExtrasSchema = z
  .strictObject({
    waiting: waitingSchema,
    routing: routingViewSchema,
    cost_usd: usdText,
    cost_ceiling_usd: usdText,
  })
  .describe("Not in OpenAI's API: Multigrid's view of the batch (docs/openai-facade.md).")

/** OpenAI's Batch object as the facade writes it. */
export const openAiBatchSchema = z
  .strictObject({
    id: z.string(),
    object: z.literal('batch'),
    endpoint: z.enum(BATCH_ENDPOINTS),
    errors: z
      .strictObject({ object: z.literal('list'), data: z.array(batchErrorEntrySchema) })
      .nullable(),
    input_file_id: z.string(),
    completion_window: z.string().regex(/^\d+h$/),
    status: z.enum(BATCH_STATUSES),
    output_file_id: z.string().nullable(),
    error_file_id: z.string().nullable(),
    created_at: seconds,
    in_progress_at: seconds.nullable(),
    expires_at: seconds,
    finalizing_at: seconds.nullable(),
    completed_at: seconds.nullable(),
    failed_at: seconds.nullable(),
    expired_at: seconds.nullable(),
    cancelling_at: seconds.nullable(),
    cancelled_at: seconds.nullable(),
    request_counts: z.strictObject({ total: count, completed: count, failed: count }),
    metadata: z.record(z.string(), z.string()).nullable(),
    usage: openAiBatchUsageSchema.optional(),
    model: z.string().nullable().optional().describe('null when the lines name several models'),
    multigrid: facadeExtrasSchema.optional(),
  })
  .describe("OpenAI's Batch object, with Multigrid's `multigrid` view (docs/openai-facade.md).")
export type OpenAiBatchObject = z.infer<typeof openAiBatchSchema>

export const openAiFileSchema = z.strictObject({
  id: z.string(),
  object: z.literal('file'),
  bytes: count,
  created_at: seconds,
  expires_at: seconds.nullable(),
  filename: z.string(),
  purpose: z.string(),
  status: z.literal('processed'),
  status_details: z.string().nullable(),
})
export type OpenAiFileObject = z.infer<typeof openAiFileSchema>

/** OpenAI's files list: `first_id` and `last_id` are "" on an empty page, as OpenAI's are. */
export const openAiFileListSchema = z.strictObject({
  object: z.literal('list'),
  data: z.array(openAiFileSchema),
  first_id: z.string(),
  last_id: z.string(),
  has_more: z.boolean(),
})

export const openAiFileDeletedSchema = z.strictObject({
  id: z.string(),
  object: z.literal('file'),
  deleted: z.literal(true),
})

/** One line of an output or error file (OpenAI's batch output format). */
export const openAiResultLineSchema = z.strictObject({
  id: z.string(),
  custom_id: z.string(),
  response: z
    .strictObject({
      status_code: z.int(),
      request_id: z.string(),
      body: z.unknown(),
    })
    .nullable(),
  error: z.strictObject({ code: z.string(), message: z.string() }).nullable(),
})

const rfc3339 = z.string().describe('an RFC 3339 time')

/** Anthropic's Message Batch object; `msgbatch_<x>` is the native `batch_<x>`. */
export const messageBatchSchema = z.strictObject({
  id: z.string(),
  type: z.literal('message_batch'),
  processing_status: z.enum(['in_progress', 'canceling', 'ended']),
  request_counts: z.strictObject({
    processing: count,
    succeeded: count,
    errored: count,
    canceled: count,
    expired: count,
  }),
  created_at: rfc3339,
  expires_at: rfc3339,
  ended_at: rfc3339.nullable(),
  cancel_initiated_at: rfc3339.nullable(),
  archived_at: z.null(),
  results_url: z.string().nullable(),
})
export type MessageBatchObject = z.infer<typeof messageBatchSchema>

/** Anthropic's page of a list: its items, whether more follow, the first and last ids. */
const anthropicPage = <T extends z.ZodType>(item: T) =>
  z.strictObject({
    data: z.array(item),
    has_more: z.boolean(),
    first_id: z.string().nullable(),
    last_id: z.string().nullable(),
  })

export const messageBatchListSchema = anthropicPage(messageBatchSchema)

/** Anthropic's model object (`GET /anthropic/v1/models/{id}`). */
export const anthropicModelSchema = z.strictObject({
  type: z.literal('model'),
  id: z.string(),
  display_name: z.string(),
  created_at: rfc3339,
})
export type AnthropicModelObject = z.infer<typeof anthropicModelSchema>

export const anthropicModelListSchema = anthropicPage(anthropicModelSchema)

export const messageBatchDeletedSchema = z.strictObject({
  id: z.string(),
  type: z.literal('message_batch_deleted'),
})

/** One line of a Message Batch's results: `{"custom_id", "result"}`. */
export const messageBatchResultLineSchema = z.strictObject({
  custom_id: z.string(),
  result: z.discriminatedUnion('type', [
    z.strictObject({
      type: z.literal('succeeded'),
      message: z.looseObject({ type: z.literal('message') }),
    }),
    z.strictObject({
      type: z.literal('errored'),
      error: z.strictObject({
        type: z.literal('error'),
        error: z.strictObject({ type: z.string(), message: z.string() }),
        request_id: z.string().nullable(),
      }),
    }),
    z.strictObject({ type: z.literal('canceled') }),
    z.strictObject({ type: z.literal('expired') }),
  ]),
})

/** An Anthropic Message (`POST /anthropic/v1/messages`), translated or passed through. */
export const anthropicMessageSchema = z.looseObject({
  id: z.string(),
  type: z.literal('message'),
  role: z.literal('assistant'),
  content: z.array(z.looseObject({ type: z.string() })),
  model: z.string(),
  stop_reason: z.string().nullable(),
  usage: z.looseObject({ input_tokens: count, output_tokens: count }),
})

export const countTokensSchema = z.strictObject({ input_tokens: count })
