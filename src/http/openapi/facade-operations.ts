/**
 * The facades' routes in the document: OpenAI's Files and Batches under /openai/v1
 * (docs/openai-facade.md) and the Anthropic API under /anthropic (docs/clients/anthropic-sdk.md).
 * Their shapes are the APIs they copy; each deviation is said where it is.
 */
import {
  countTokensBodySchema,
  messageBatchCreateBodySchema,
  messagesBodySchema,
} from '../../schemas/anthropic-requests.ts'
import { listQuery as messageBatchListQuery } from '../anthropic/message-batches-routes.ts'
import {
  createBody as openAiCreateBatchBody,
  listQuery as openAiBatchListQuery,
} from '../openai/batches-routes.ts'
import { listQuery as openAiFileListQuery } from '../openai/files-routes.ts'
import type { Operations } from './operation.ts'

const RETRY = {
  'Idempotency-Key':
    'the same key with the same body again returns the batch the first create made; with another body, 422 idempotency_key_reused',
  'X-Stainless-Retry-Count':
    "the SDKs' retry header: above 0, a create whose body repeats an earlier one returns that batch",
}

export const OPENAI_OPERATIONS: Operations = {
  'POST /openai/v1/files': {
    id: 'openaiUploadFile',
    summary: 'Upload a batch input file (multipart form)',
    docs: 'docs/openai-facade.md',
    security: 'key',
    body: {
      multipart: {
        type: 'object',
        required: ['purpose', 'file'],
        properties: {
          purpose: { type: 'string', enum: ['batch'], description: 'only "batch" is stored' },
          file: {
            type: 'string',
            contentMediaType: 'application/octet-stream',
            description: 'the JSONL file; at most MULTIGRID_MAX_FILE_BYTES (200 MB by default)',
          },
        },
      },
      description: '`purpose` before `file`, as the SDKs send it.',
    },
    answers: { 200: { description: 'the file', json: 'OpenAiFile' } },
  },
  'GET /openai/v1/files': {
    id: 'openaiListFiles',
    summary: "The account's files, uploaded and rendered",
    docs: 'docs/openai-facade.md',
    security: 'key',
    query: openAiFileListQuery,
    answers: { 200: { description: 'the files', json: 'OpenAiFileList' } },
  },
  'GET /openai/v1/files/{id}': {
    id: 'openaiGetFile',
    summary: 'A file',
    docs: 'docs/openai-facade.md',
    security: 'key',
    answers: { 200: { description: 'the file', json: 'OpenAiFile' } },
  },
  'DELETE /openai/v1/files/{id}': {
    id: 'openaiDeleteFile',
    summary: 'Delete a file',
    docs: 'docs/openai-facade.md',
    security: 'key',
    answers: { 200: { description: 'deleted', json: 'OpenAiFileDeleted' } },
  },
  'GET /openai/v1/files/{id}/content': {
    id: 'openaiGetFileContent',
    summary:
      "A file's content: an upload as stored, an output or error file rendered from the results",
    docs: 'docs/openai-facade.md',
    security: 'key',
    answers: {
      200: {
        description:
          "JSONL. An output or error file has one OpenAiResultLine per line (OpenAI's batch output format); an upload is the input file as sent.",
        jsonl: ['OpenAiResultLine', 'NativeInputLine'],
        media: 'application/jsonl',
      },
    },
  },
  'POST /openai/v1/batches': {
    id: 'openaiCreateBatch',
    summary: 'Create a batch from an uploaded file',
    docs: 'docs/openai-facade.md',
    security: 'key',
    headers: RETRY,
    body: {
      json: openAiCreateBatchBody,
      description:
        'OpenAI\'s create. Deviations: `completion_window` may be any "Nh" from 1 to 168; `max_cost_usd` and `wait_for_credit` are Multigrid\'s (the SDKs send them through `extra_body`, which is merged into the body). A file that fails validation makes a `failed` batch whose `errors` list its problems.',
    },
    answers: { 200: { description: 'the batch', json: 'OpenAiBatch' } },
  },
  'GET /openai/v1/batches': {
    id: 'openaiListBatches',
    summary: "The account's batches, newest first",
    docs: 'docs/openai-facade.md',
    security: 'key',
    query: openAiBatchListQuery,
    answers: { 200: { description: 'a page of batches', json: 'OpenAiBatchList' } },
  },
  'GET /openai/v1/batches/{id}': {
    id: 'openaiGetBatch',
    summary: "A batch in OpenAI's shape, with `usage`, `model` and Multigrid's `multigrid` view",
    docs: 'docs/openai-facade.md',
    security: 'key',
    answers: { 200: { description: 'the batch', json: 'OpenAiBatch' } },
  },
  'POST /openai/v1/batches/{id}/cancel': {
    id: 'openaiCancelBatch',
    summary: 'Cancel a batch',
    docs: 'docs/openai-facade.md',
    security: 'key',
    answers: { 200: { description: 'the batch, cancelling or cancelled', json: 'OpenAiBatch' } },
  },
}

/** Under /anthropic every refusal is in Anthropic's error shape (build-openapi.ts). */
export const ANTHROPIC_OPERATIONS: Operations = {
  'POST /anthropic/v1/messages': {
    id: 'anthropicCreateMessage',
    summary: 'A Messages call on any catalog model: passed through to Anthropic, or translated',
    docs: 'docs/clients/anthropic-sdk.md',
    security: 'anthropicKey',
    body: { json: messagesBodySchema },
    answers: {
      200: {
        description:
          "the message; with `stream: true`, Anthropic's stream events as server-sent events",
        json: 'AnthropicMessage',
        streams: true,
      },
    },
  },
  'POST /anthropic/v1/messages/count_tokens': {
    id: 'anthropicCountTokens',
    summary:
      "Anthropic's count for Anthropic-only models, else the gateway's bound of the prompt (what its ceiling holds)",
    docs: 'docs/clients/anthropic-sdk.md',
    security: 'anthropicKey',
    body: { json: countTokensBodySchema },
    answers: { 200: { description: 'the input tokens', json: 'CountTokens' } },
  },
  'POST /anthropic/v1/messages/batches': {
    id: 'anthropicCreateMessageBatch',
    summary: 'A Message Batch, run as a native batch of chat lines',
    docs: 'docs/clients/anthropic-sdk.md',
    security: 'anthropicKey',
    headers: RETRY,
    body: {
      json: messageBatchCreateBodySchema,
      description:
        'every invalid request is reported at once, with the native `issues` beside the error',
    },
    answers: { 200: { description: 'the message batch', json: 'MessageBatch' } },
  },
  'GET /anthropic/v1/messages/batches': {
    id: 'anthropicListMessageBatches',
    summary: "The account's message batches, with Anthropic's paging",
    docs: 'docs/clients/anthropic-sdk.md',
    security: 'anthropicKey',
    query: messageBatchListQuery,
    answers: { 200: { description: 'a page', json: 'MessageBatchList' } },
  },
  'GET /anthropic/v1/messages/batches/{id}': {
    id: 'anthropicGetMessageBatch',
    summary: 'A message batch (`msgbatch_<x>` is the native `batch_<x>`)',
    docs: 'docs/clients/anthropic-sdk.md',
    security: 'anthropicKey',
    answers: { 200: { description: 'the message batch', json: 'MessageBatch' } },
  },
  'DELETE /anthropic/v1/messages/batches/{id}': {
    id: 'anthropicDeleteMessageBatch',
    summary: 'Delete an ended message batch',
    docs: 'docs/clients/anthropic-sdk.md',
    security: 'anthropicKey',
    answers: { 200: { description: 'deleted', json: 'MessageBatchDeleted' } },
  },
  'POST /anthropic/v1/messages/batches/{id}/cancel': {
    id: 'anthropicCancelMessageBatch',
    summary: 'Cancel a message batch',
    docs: 'docs/clients/anthropic-sdk.md',
    security: 'anthropicKey',
    answers: { 200: { description: 'the message batch', json: 'MessageBatch' } },
  },
  'GET /anthropic/v1/models': {
    id: 'anthropicListModels',
    summary: "The chat models this key can call here, with Anthropic's paging",
    docs: 'docs/clients/anthropic-sdk.md',
    security: 'anthropicKey',
    query: messageBatchListQuery,
    answers: { 200: { description: 'a page', json: 'AnthropicModelList' } },
  },
  'GET /anthropic/v1/models/{id}': {
    id: 'anthropicGetModel',
    summary: 'One model by its id (URL-encoded)',
    docs: 'docs/clients/anthropic-sdk.md',
    security: 'anthropicKey',
    answers: { 200: { description: 'the model', json: 'AnthropicModel' } },
  },
  'GET /anthropic/v1/messages/batches/{id}/results': {
    id: 'anthropicGetMessageBatchResults',
    summary: 'The results of an ended message batch, in request order',
    docs: 'docs/clients/anthropic-sdk.md',
    security: 'anthropicKey',
    answers: {
      200: {
        description: 'JSONL, one MessageBatchResultLine per request',
        jsonl: 'MessageBatchResultLine',
        media: 'application/x-jsonl',
      },
    },
  },
}
