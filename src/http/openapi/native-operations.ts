/** The native API's routes in the document (docs/native-api.md, docs/live.md, docs/events-and-webhooks.md). */
import { chatBodySchema, embeddingsBodySchema } from '../../schemas/requests.ts'
import { responsesBodySchema } from '../../schemas/line-schemas.ts'
import { createWebhookBody, deliveriesQuery } from '../../schemas/webhooks.ts'
import {
  listQuery as batchListQuery,
  resultsQuery,
  retryOptions,
  submitOptions,
} from '../native-batches.ts'
import { usageQueryFields } from '../usage-report.ts'
import type { Operations } from './operation.ts'

const IDEMPOTENCY = {
  'Idempotency-Key':
    'the same key with the same request again returns the batch the first request made, with its current state; with another request, 422 idempotency_key_reused',
}

/** The live endpoints, the same under / and /openai (docs/live.md). */
function live(prefix: '' | '/openai'): Operations {
  const id = (name: string) => (prefix ? `openai${name[0]!.toUpperCase()}${name.slice(1)}` : name)
  return {
    [`GET ${prefix}/v1/models`]: {
      id: id('listModels'),
      summary: 'The models this key can call, with their endpoints, limits and prices',
      docs: 'docs/live.md',
      security: 'key',
      answers: { 200: { description: 'the models', json: 'ModelList' } },
    },
    [`GET ${prefix}/v1/models/{id}`]: {
      id: id('getModel'),
      summary:
        'One model as the list has it, by its id (URL-encoded, or with its "/" as it is) or an alias',
      docs: 'docs/live.md',
      security: 'key',
      answers: { 200: { description: 'the model', json: 'Model' } },
    },
    [`POST ${prefix}/v1/chat/completions`]: {
      id: id('createChatCompletion'),
      summary: 'A live chat completion, held, routed and settled as a batch line is',
      docs: 'docs/live.md',
      security: 'key',
      body: { json: chatBodySchema },
      answers: {
        200: {
          description:
            "the completion; with `stream: true`, OpenAI's chunks as server-sent events (`text/event-stream`)",
          json: 'ChatCompletion',
          streams: true,
        },
      },
    },
    [`POST ${prefix}/v1/embeddings`]: {
      id: id('createEmbeddings'),
      summary: 'Live embeddings',
      docs: 'docs/live.md',
      security: 'key',
      body: { json: embeddingsBodySchema },
      answers: { 200: { description: 'the embeddings', json: 'Embeddings' } },
    },
    [`POST ${prefix}/v1/responses`]: {
      id: id('createResponse'),
      summary: 'The Responses API, live: passed through or translated to chat completions',
      docs: 'docs/clients/responses.md',
      security: 'key',
      body: {
        json: responsesBodySchema,
        description:
          'A Responses API request. `store: true`, `previous_response_id` and `item_reference` input items are refused (nothing is stored); a field that cannot be translated for a chat-only offering is a 400 naming it.',
      },
      answers: {
        200: {
          description:
            "the Response object; with `stream: true`, OpenAI's Responses events as server-sent events",
          json: 'Response',
          streams: true,
        },
      },
    },
  }
}

export const NATIVE_OPERATIONS: Operations = {
  'GET /healthz': {
    id: 'getHealth',
    summary: 'Liveness',
    docs: 'docs/operations.md',
    security: 'none',
    answers: { 200: { description: 'the process answers', json: 'Health' } },
  },
  'GET /readyz': {
    id: 'getReadiness',
    summary: 'Readiness: each dependency checked in time',
    docs: 'docs/operations.md',
    security: 'none',
    answers: {
      200: { description: 'every check ok', json: 'Health' },
      503: { description: 'a check failed; `checks` names it', json: 'Health' },
    },
  },
  'GET /metrics': {
    id: 'getMetrics',
    summary: 'Prometheus metrics (behind MULTIGRID_METRICS_TOKEN when it is set)',
    docs: 'docs/usage-and-metrics.md',
    security: 'metrics',
    answers: { 200: { description: 'Prometheus text format 0.0.4', media: 'text/plain' } },
  },
  'POST /v1/batches': {
    id: 'submitBatch',
    summary: 'Submit a JSONL file as a batch (or quote it with dry_run=true)',
    docs: 'docs/native-api.md',
    security: 'key',
    query: submitOptions,
    headers: {
      ...IDEMPOTENCY,
      'X-Multigrid-Batch-Name': 'the batch name, as the `name` query parameter',
    },
    body: {
      jsonl: 'NativeInputLine',
      description:
        'The file itself (`curl --data-binary @requests.jsonl`), not a form upload: one NativeInputLine per line (docs/schemas/native-input-line.schema.json). Blank lines are skipped and counted; at most 16 MiB and 50,000 lines by default.',
    },
    answers: {
      201: { description: 'the batch, stored and held', json: 'Batch' },
      200: {
        description:
          'with dry_run=true, the quote; with an Idempotency-Key seen before, the batch it made',
        json: ['BatchQuote', 'Batch'],
      },
    },
  },
  'GET /v1/batches': {
    id: 'listBatches',
    summary: "The account's batches, newest first",
    docs: 'docs/native-api.md',
    security: 'key',
    query: batchListQuery,
    answers: { 200: { description: 'a page of batches', json: 'BatchList' } },
  },
  'GET /v1/batches/{id}': {
    id: 'getBatch',
    summary: 'A batch, its counts current',
    docs: 'docs/native-api.md',
    security: 'key',
    answers: { 200: { description: 'the batch', json: 'Batch' } },
  },
  'DELETE /v1/batches/{id}': {
    id: 'cancelBatch',
    summary: 'Cancel a batch: nothing more is sent upstream',
    docs: 'docs/native-api.md',
    security: 'key',
    answers: { 200: { description: 'the batch, cancelling or cancelled', json: 'Batch' } },
  },
  'POST /v1/batches/{id}/retry': {
    id: 'retryBatch',
    summary: 'A child batch of the lines that did not succeed',
    docs: 'docs/events-and-webhooks.md',
    security: 'key',
    query: retryOptions,
    headers: IDEMPOTENCY,
    body: {
      json: retryOptions,
      required: false,
      description: 'the same options as the query; the body wins. Empty is fine.',
    },
    answers: {
      201: { description: 'the child batch', json: 'Batch' },
      200: { description: 'the batch an Idempotency-Key seen before made', json: 'Batch' },
    },
  },
  'GET /v1/batches/{id}/events': {
    id: 'streamBatchEvents',
    summary: "The batch's progress as server-sent events",
    docs: 'docs/events-and-webhooks.md',
    security: 'key',
    headers: { 'Last-Event-ID': 'resume: only states past this version are sent' },
    answers: {
      200: {
        description:
          '`event: batch` with `data:` a Batch object and `id:` its version, on every change, until the batch ends',
        media: 'text/event-stream',
      },
    },
  },
  'GET /v1/batches/{id}/results': {
    id: 'getBatchResults',
    summary: 'The result lines in submitted order, also while the batch runs',
    docs: 'docs/native-api.md',
    security: 'key',
    query: resultsQuery,
    answers: {
      200: {
        description:
          'JSONL, one NativeResultLine per input line (docs/schemas/native-result-line.schema.json); with format=input, the original input lines.',
        jsonl: ['NativeResultLine', 'NativeInputLine'],
        media: 'application/jsonl',
        headers: { 'X-Multigrid-Batch-Status': "the batch's status as the lines were read" },
      },
    },
  },
  'GET /v1/usage': {
    id: 'getUsage',
    summary: "The account's usage by day, model or provider",
    docs: 'docs/usage-and-metrics.md',
    security: 'key',
    query: usageQueryFields,
    answers: { 200: { description: 'one row per group', json: 'UsageReport' } },
  },
  'POST /v1/webhooks': {
    id: 'createWebhook',
    summary: 'Register a webhook; the answer is the only one with its signing secret',
    docs: 'docs/events-and-webhooks.md',
    security: 'key',
    body: { json: createWebhookBody },
    answers: { 201: { description: 'the webhook and its secret', json: 'WebhookCreated' } },
  },
  'GET /v1/webhooks': {
    id: 'listWebhooks',
    summary: "The account's webhooks",
    docs: 'docs/events-and-webhooks.md',
    security: 'key',
    answers: { 200: { description: 'every webhook', json: 'WebhookList' } },
  },
  'DELETE /v1/webhooks/{id}': {
    id: 'deleteWebhook',
    summary: 'Delete a webhook',
    docs: 'docs/events-and-webhooks.md',
    security: 'key',
    answers: { 200: { description: 'deleted', json: 'WebhookDeleted' } },
  },
  'POST /v1/webhooks/{id}/enable': {
    id: 'enableWebhook',
    summary: 'Enable a webhook again after its failures disabled it',
    docs: 'docs/webhooks-and-streams.md',
    security: 'key',
    answers: { 200: { description: 'the webhook, enabled', json: 'Webhook' } },
  },
  'GET /v1/webhooks/{id}/deliveries': {
    id: 'listWebhookDeliveries',
    summary: "A webhook's delivery log, newest first",
    docs: 'docs/events-and-webhooks.md',
    security: 'key',
    query: deliveriesQuery,
    answers: { 200: { description: 'a page of deliveries', json: 'WebhookDeliveryList' } },
  },
  ...live(''),
  ...live('/openai'),
}
