/**
 * The document's named schemas (`#/components/schemas/<name>`), each made from the zod schema the
 * gateway renders or validates with: nothing here is written twice. Answers are converted as
 * output (what is sent), request shapes as input (what may be sent).
 */
import { z } from 'zod'
import {
  accountSchema,
  fineTuneListSchema,
  fineTuneSchema,
  apiKeyCreatedSchema,
  apiKeySchema,
} from '../../schemas/admin-objects.ts'
import { anthropicErrorSchema, errorEnvelopeSchema } from '../../schemas/error-envelope.ts'
import {
  anthropicMessageSchema,
  anthropicModelListSchema,
  anthropicModelSchema,
  countTokensSchema,
  messageBatchDeletedSchema,
  messageBatchListSchema,
  messageBatchResultLineSchema,
  messageBatchSchema,
  openAiBatchSchema,
  openAiFileDeletedSchema,
  openAiFileListSchema,
  openAiFileSchema,
  openAiResultLineSchema,
} from '../../schemas/facade-objects.ts'
import {
  inputLineSchema,
  resultLineSchema,
  responsesBodySchema,
} from '../../schemas/line-schemas.ts'
import { chatBodySchema, embeddingsBodySchema } from '../../schemas/requests.ts'
import {
  chatCompletionSchema,
  embeddingsAnswerSchema,
  responseObjectSchema,
} from '../../schemas/live-answers.ts'
import {
  batchObjectSchema,
  batchQuoteSchema,
  healthSchema,
  modelListSchema,
  modelSchema,
  pageOf,
  usageReportSchema,
  webhookCreatedSchema,
  webhookDeletedSchema,
  webhookDeliverySchema,
  webhookSchema,
} from '../../schemas/native-objects.ts'

/** Every answer schema by its component name. */
export const ANSWERS = {
  Error: errorEnvelopeSchema,
  AnthropicError: anthropicErrorSchema,
  Batch: batchObjectSchema,
  BatchQuote: batchQuoteSchema,
  BatchList: pageOf(batchObjectSchema),
  NativeResultLine: resultLineSchema,
  UsageReport: usageReportSchema,
  Webhook: webhookSchema,
  WebhookCreated: webhookCreatedSchema,
  WebhookDeleted: webhookDeletedSchema,
  WebhookList: z.strictObject({ object: z.literal('list'), data: z.array(webhookSchema) }),
  WebhookDeliveryList: pageOf(webhookDeliverySchema),
  ModelList: modelListSchema,
  Model: modelSchema,
  Health: healthSchema,
  ChatCompletion: chatCompletionSchema,
  Embeddings: embeddingsAnswerSchema,
  Response: responseObjectSchema,
  Account: accountSchema,
  AccountList: pageOf(accountSchema),
  ApiKey: apiKeySchema,
  ApiKeyList: z.strictObject({ object: z.literal('list'), data: z.array(apiKeySchema) }),
  ApiKeyCreated: apiKeyCreatedSchema,
  Adapter: fineTuneSchema,
  AdapterList: fineTuneListSchema,
  OpenAiBatch: openAiBatchSchema,
  OpenAiBatchList: pageOf(openAiBatchSchema),
  OpenAiFile: openAiFileSchema,
  OpenAiFileList: openAiFileListSchema,
  OpenAiFileDeleted: openAiFileDeletedSchema,
  OpenAiResultLine: openAiResultLineSchema,
  MessageBatch: messageBatchSchema,
  MessageBatchList: messageBatchListSchema,
  MessageBatchDeleted: messageBatchDeletedSchema,
  AnthropicModel: anthropicModelSchema,
  AnthropicModelList: anthropicModelListSchema,
  MessageBatchResultLine: messageBatchResultLineSchema,
  AnthropicMessage: anthropicMessageSchema,
  CountTokens: countTokensSchema,
} as const satisfies Record<string, z.ZodType>
export type AnswerName = keyof typeof ANSWERS

/** Request shapes with a name of their own: the native file's line and the bodies it holds. */
export const REQUESTS = {
  NativeInputLine: inputLineSchema,
  ChatRequest: chatBodySchema,
  EmbeddingsRequest: embeddingsBodySchema,
  ResponsesRequest: responsesBodySchema,
} as const satisfies Record<string, z.ZodType>
export type RequestName = keyof typeof REQUESTS

export const ref = (name: AnswerName | RequestName) => ({ $ref: `#/components/schemas/${name}` })

/** A zod schema as a JSON Schema inside the document: no `$schema` or `$id` of its own. */
export function bare(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _schema, $id: _id, ...rest } = schema
  return rest
}

/** A request shape (a body, a query) as JSON Schema: inline, or a reference to its component. */
export function inputSchema(schema: z.ZodType): Record<string, unknown> {
  const name = (Object.keys(REQUESTS) as RequestName[]).find((key) => REQUESTS[key] === schema)
  if (name) return ref(name)
  return bare(
    z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>,
  )
}

function registered(schemas: Record<string, z.ZodType>, io: 'input' | 'output') {
  const registry = z.registry<{ id: string }>()
  for (const [id, schema] of Object.entries(schemas)) registry.add(schema, { id })
  const { schemas: made } = z.toJSONSchema(registry, {
    io,
    unrepresentable: 'any',
    uri: (id) => `#/components/schemas/${id}`,
  }) as { schemas: Record<string, Record<string, unknown>> }
  return Object.fromEntries(Object.entries(made).map(([id, schema]) => [id, bare(schema)]))
}

/** `components.schemas`: the answers as sent, the input line as it may be written. */
export function componentSchemas(): Record<string, Record<string, unknown>> {
  return { ...registered(ANSWERS, 'output'), ...registered(REQUESTS, 'input') }
}
