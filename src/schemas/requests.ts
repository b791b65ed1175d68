/**
 * Request shapes for the two endpoints, the single source for batch lines and live calls.
 * Objects are loose: parameters the gateway does not know pass through to the upstream, which
 * judges them; parameters the catalog marks unsupported are refused by the validator.
 */
import { z } from 'zod'

/**
 * An integer field. zod names a wrong type of z.int() "expected number"; this says "must be an
 * integer", which describeZodIssue reads as the expected type (a string is not an integer).
 */
const integer = () =>
  z.int({ error: (issue) => (issue.code === 'invalid_type' ? 'must be an integer' : undefined) })

/**
 * A price in USD per million tokens (docs/money-and-limits.md max_price): a decimal string, compared exactly with
 * decimal.js, or a JSON number. No transform (the compiled check returns its input as the output),
 * so the catalog reads either form.
 */
const usdPerMtok = z.union([
  z
    .string()
    .regex(
      /^\d+(\.\d+)?$/,
      'must be a non-negative decimal string such as "1.00" (USD per million tokens)',
    ),
  z.number().min(0),
])

export const routingSchema = z.strictObject({
  order: z.array(z.string().min(1)).min(1).optional(),
  only: z.array(z.string().min(1)).min(1).optional(),
  ignore: z.array(z.string().min(1)).optional(),
  allow_fallbacks: z.boolean().optional(),
  /** Offerings dearer than this on either side are not used for the request. */
  max_price: z
    .strictObject({ prompt: usdPerMtok.optional(), completion: usdPerMtok.optional() })
    .optional(),
})
/** A line's or request's `provider` object: how it is routed among the model's offerings. */
export type Routing = z.output<typeof routingSchema>

/**
 * Asking Anthropic to cache the prompt up to here (docs/pricing.md), as LiteLLM accepts it: on a
 * content part or a tool. The Anthropic adapter passes it on; the others drop it.
 */
export const cacheControlSchema = z.strictObject({
  type: z.literal('ephemeral'),
  ttl: z.enum(['5m', '1h']).optional(),
})
const cache_control = cacheControlSchema.optional()

const textPart = z.looseObject({ type: z.literal('text'), text: z.string(), cache_control })
const imagePart = z.looseObject({
  type: z.literal('image_url'),
  image_url: z.looseObject({ url: z.string().min(1) }),
  cache_control,
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

// The shapes of OpenAI's chat parameters, as the official `openai` package (v7) types them
// (resources/chat/completions): checked here so a malformed one is refused at validation with
// its path, not sent upstream to fail every line of a batch. Fields they do not name pass on.
const name = z.string().min(1)
const functionTool = z.looseObject({
  type: z.literal('function'),
  function: z.looseObject({
    name,
    description: z.string().optional(),
    parameters: z.looseObject({}).optional(),
    strict: z.boolean().nullable().optional(),
  }),
  cache_control,
})
const customTool = z.looseObject({ type: z.literal('custom'), custom: z.looseObject({ name }) })
export const toolSchema = z.discriminatedUnion('type', [functionTool, customTool])

export const toolChoiceSchema = z.union([
  z.enum(['none', 'auto', 'required']),
  z.discriminatedUnion('type', [
    z.looseObject({ type: z.literal('function'), function: z.looseObject({ name }) }),
    z.looseObject({ type: z.literal('custom'), custom: z.looseObject({ name }) }),
    z.looseObject({
      type: z.literal('allowed_tools'),
      allowed_tools: z.looseObject({
        mode: z.enum(['auto', 'required']),
        tools: z.array(z.looseObject({})),
      }),
    }),
  ]),
])

/** Token ids (as decimal strings) to a bias from -100 to 100, which OpenAI takes as an integer. */
export const logitBiasSchema = z.record(
  z.string().regex(/^[0-9]{1,10}$/, 'must be a token id in decimal digits, such as "50256"'),
  integer().min(-100).max(100),
)

// The package lets json_schema.schema be left out; the gateway needs it to check the answers
// (docs/open-models.md), so a structured line must carry one. The name's rule is OpenAI's.
export const responseFormatSchema = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('text') }),
  z.looseObject({ type: z.literal('json_object') }),
  z.looseObject({
    type: z.literal('json_schema'),
    json_schema: z.looseObject({
      name: z
        .string()
        .regex(
          /^[A-Za-z0-9_-]{1,64}$/,
          'must be 1 to 64 letters, digits, underscores or dashes, such as "answer"',
        ),
      description: z.string().optional(),
      schema: z.looseObject({}),
      strict: z.boolean().nullable().optional(),
    }),
  }),
])

export const chatBodySchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(messageSchema).min(1),
  max_tokens: integer().min(1).optional(),
  max_completion_tokens: integer().min(1).optional(),
  n: integer().min(1).max(8).optional(),
  stream: z.boolean().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  stop: stop.optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  seed: integer().optional(),
  logprobs: z.boolean().optional(),
  top_logprobs: integer().min(0).max(20).optional(),
  response_format: responseFormatSchema.optional(),
  tools: z.array(toolSchema).optional(),
  tool_choice: toolChoiceSchema.optional(),
  logit_bias: logitBiasSchema.nullable().optional(),
  user: z.string().optional(),
  provider: routingSchema.optional(),
})

export const embeddingsBodySchema = z.looseObject({
  model: z.string().min(1),
  input: z.union([
    z.string().min(1),
    z.array(z.string().min(1)).min(1).max(2048),
    z.array(integer().min(0)).min(1),
    z
      .array(z.array(integer().min(0)).min(1))
      .min(1)
      .max(2048),
  ]),
  dimensions: integer().min(1).optional(),
  encoding_format: z.enum(['float', 'base64']).optional(),
  user: z.string().optional(),
  provider: routingSchema.optional(),
})

export type ChatBody = z.infer<typeof chatBodySchema>
export type EmbeddingsBody = z.infer<typeof embeddingsBodySchema>
