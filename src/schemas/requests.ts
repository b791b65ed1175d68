/**
 * Request shapes for the two endpoints, the single source for batch lines and live calls.
 * Objects are loose: parameters the gateway does not know pass through to the upstream, which
 * judges them; parameters the catalog marks unsupported are refused by the validator.
 */
import { z } from 'zod'

export const routingSchema = z.strictObject({
  order: z.array(z.string().min(1)).min(1).optional(),
  only: z.array(z.string().min(1)).min(1).optional(),
  ignore: z.array(z.string().min(1)).optional(),
  allow_fallbacks: z.boolean().optional(),
})

const textPart = z.looseObject({ type: z.literal('text'), text: z.string() })
const imagePart = z.looseObject({
  type: z.literal('image_url'),
  image_url: z.looseObject({ url: z.string().min(1) }),
})
const contentPart = z.discriminatedUnion('type', [textPart, imagePart])

const content = z.union([z.string(), z.array(contentPart).min(1)])

export const messageSchema = z.discriminatedUnion('role', [
  z.looseObject({ role: z.literal('system'), content, name: z.string().optional() }),
  z.looseObject({ role: z.literal('developer'), content, name: z.string().optional() }),
  z.looseObject({ role: z.literal('user'), content, name: z.string().optional() }),
  z.looseObject({
    role: z.literal('assistant'),
    content: content.nullable().optional(),
    tool_calls: z.array(z.looseObject({})).optional(),
  }),
  z.looseObject({ role: z.literal('tool'), content, tool_call_id: z.string().min(1) }),
])

const stop = z.union([z.string(), z.array(z.string()).max(4)])

export const chatBodySchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(messageSchema).min(1),
  max_tokens: z.int().min(1).optional(),
  max_completion_tokens: z.int().min(1).optional(),
  n: z.int().min(1).max(8).optional(),
  stream: z.boolean().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  stop: stop.optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  seed: z.int().optional(),
  logprobs: z.boolean().optional(),
  top_logprobs: z.int().min(0).max(20).optional(),
  response_format: z
    .looseObject({ type: z.enum(['text', 'json_object', 'json_schema']) })
    .optional(),
  tools: z.array(z.looseObject({ type: z.string() })).optional(),
  user: z.string().optional(),
  provider: routingSchema.optional(),
})

export const embeddingsBodySchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([
    z.string().min(1),
    z.array(z.string().min(1)).min(1).max(2048),
    z.array(z.int().min(0)).min(1),
    z.array(z.array(z.int().min(0)).min(1)).min(1).max(2048),
  ]),
  dimensions: z.int().min(1).optional(),
  encoding_format: z.enum(['float', 'base64']).optional(),
  user: z.string().optional(),
  provider: routingSchema.optional(),
})

export type ChatBody = z.infer<typeof chatBodySchema>
export type EmbeddingsBody = z.infer<typeof embeddingsBodySchema>
