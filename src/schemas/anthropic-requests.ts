/**
 * The Anthropic API's request shapes under /anthropic (docs/clients/anthropic-sdk.md), as published
 * in GET /openapi.json. A request is checked field by field where it is translated
 * (providers/anthropic/convert-messages-to-chat.ts) and then as the chat body it becomes
 * (requests.ts), so these name only the fields every request has; the others pass on.
 */
import { z } from 'zod'

const messages = z
  .array(
    z.looseObject({
      role: z.enum(['user', 'assistant']),
      content: z.union([z.string(), z.array(z.looseObject({ type: z.string() }))]),
    }),
  )
  .min(1)

/** `POST /anthropic/v1/messages`. */
export const messagesBodySchema = z.looseObject({
  model: z.string().min(1),
  max_tokens: z.int().min(1),
  messages,
  system: z.union([z.string(), z.array(z.looseObject({ type: z.literal('text') }))]).optional(),
  stream: z.boolean().optional(),
})

/** `POST /anthropic/v1/messages/count_tokens`: a Messages request without max_tokens. */
export const countTokensBodySchema = messagesBodySchema.omit({ max_tokens: true, stream: true })

/** `POST /anthropic/v1/messages/batches`: Anthropic's custom_id rule (convert-message-batch.ts). */
export const messageBatchCreateBodySchema = z.looseObject({
  requests: z
    .array(
      z.looseObject({
        custom_id: z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/),
        params: messagesBodySchema,
      }),
    )
    .min(1),
})
