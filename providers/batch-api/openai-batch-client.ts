/**
 * OpenAI's Files + Batches API (docs/batch-lanes.md): upload a chunk's JSONL, create the batch with
 * `metadata.mg_chunk`, list batches to find a create a crash cut off, read a batch, read its
 * output and error files, cancel. One HTTP call a method; failures as values.
 */
import { createHttpClient } from '../http-client.ts'
import { prepareOpenAIBody } from '../openai/prepare-openai-body.ts'
import { prepareForOffering } from '../prepare-for-offering.ts'
import { callJson, callText, listPage, upstreamIdOf } from './batch-http.ts'
import type {
  BatchCall,
  BatchClientBase,
  BatchClientOptions,
  BatchPage,
  ChunkRequest,
  ProviderBatch,
  ProviderBatchStatus,
} from './types.ts'

export const OPENAI_MAX_LINES = 50_000
export const OPENAI_MAX_BYTES = 200 * 1024 * 1024
const urls = {
  chat: '/v1/chat/completions',
  embeddings: '/v1/embeddings',
  responses: '/v1/responses',
} as const

/** The OpenAI batch client: the base methods plus upload, create and list. */
export interface OpenAIBatchClient extends BatchClientBase {
  readonly kind: 'openai'
  /** Uploads a chunk's input (openAIBatchInput) as a file of purpose `batch`; its file id. */
  upload(chunkId: string, jsonl: string): Promise<BatchCall<string>>
  create(
    chunk: Pick<ChunkRequest, 'chunkId' | 'endpoint'>,
    fileId: string,
  ): Promise<BatchCall<ProviderBatch>>
  /** One page of batches, newest first: the caller looks for its `mg_chunk` there. */
  list(after: string | null, limit?: number): Promise<BatchCall<BatchPage>>
  /** A file's content (output or error file), JSONL text. */
  readFile(fileId: string): Promise<BatchCall<string>>
}

/** The chunk as OpenAI's batch input: one request a line, custom_id `mg-<n>`. */
export function openAIBatchInput(chunk: ChunkRequest): string {
  const target = { model: chunk.model, maxTokensParam: chunk.maxTokensParam }
  let text = ''
  for (const line of chunk.lines) {
    const row = {
      custom_id: upstreamIdOf(line.position),
      method: 'POST',
      url: urls[chunk.endpoint],
      // A Responses request goes as it came, with the offering's model id (responses-calls.ts).
      body: line.native
        ? prepareForOffering(line.native, target, ['stream'])
        : prepareOpenAIBody(line.body, target),
    }
    text += JSON.stringify(row) + '\n'
  }
  return text
}

function statusOf(raw: string): ProviderBatchStatus {
  if (raw === 'completed' || raw === 'expired' || raw === 'cancelled')
    return { unified: 'ended', raw }
  if (raw === 'failed') return { unified: 'failed', raw }
  if (raw === 'cancelling') return { unified: 'cancelling', raw }
  return { unified: 'running', raw }
}

/** An OpenAI batch object in the spec's terms. */
export function toProviderBatch(json: Record<string, unknown>): ProviderBatch {
  const metadata = (json.metadata ?? null) as Record<string, unknown> | null
  const errors = (json.errors ?? null) as { data?: { code?: unknown }[] } | null
  const code = errors?.data?.[0]?.code
  return {
    id: String(json.id),
    status: statusOf(String(json.status)),
    outputFileId: typeof json.output_file_id === 'string' ? json.output_file_id : null,
    errorFileId: typeof json.error_file_id === 'string' ? json.error_file_id : null,
    chunkId: typeof metadata?.mg_chunk === 'string' ? metadata.mg_chunk : null,
    failureCode: typeof code === 'string' ? code : null,
  }
}

/** Multipart by hand: the HTTP client sends string bodies, and JSONL is text. */
function multipart(chunkId: string, jsonl: string): { body: string; type: string } {
  const boundary = `mg-${crypto.randomUUID()}`
  const body =
    `--${boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${chunkId}.jsonl"\r\n` +
    `Content-Type: application/jsonl\r\n\r\n${jsonl}\r\n--${boundary}--\r\n`
  return { body, type: `multipart/form-data; boundary=${boundary}` }
}

/** A client for kind `openai`; the base URL ends in /v1 (https://api.openai.com/v1). */
export function createOpenAIBatchClient(options: BatchClientOptions): OpenAIBatchClient {
  const client = createHttpClient(options.baseUrl, { connections: 4, connectTimeoutMs: 10_000 })
  const auth: Record<string, string> = options.apiKey
    ? { authorization: `Bearer ${options.apiKey}` }
    : {}
  const json = { ...auth, 'content-type': 'application/json' }
  const { timeoutMs, apiKey } = options

  const batchCall = async (method: 'GET' | 'POST', path: string, body?: string) => {
    const result = await callJson(client, { method, path, headers: json, body }, timeoutMs, apiKey)
    return result.ok ? { ok: true as const, value: toProviderBatch(result.value) } : result
  }

  return {
    kind: 'openai',
    name: options.name,
    maxLines: OPENAI_MAX_LINES,
    maxBytes: OPENAI_MAX_BYTES,
    async upload(chunkId, jsonl) {
      const form = multipart(chunkId, jsonl)
      const headers = { ...auth, 'content-type': form.type }
      const call = { method: 'POST' as const, path: '/files', headers, body: form.body }
      const result = await callJson(client, call, timeoutMs, apiKey)
      return result.ok ? { ok: true, value: String(result.value.id) } : result
    },
    create(chunk, fileId) {
      const body = {
        input_file_id: fileId,
        endpoint: urls[chunk.endpoint],
        completion_window: '24h',
        metadata: { mg_chunk: chunk.chunkId },
      }
      return batchCall('POST', '/batches', JSON.stringify(body))
    },
    async list(after, limit = 100) {
      const query = new URLSearchParams({ limit: String(limit) })
      if (after !== null) query.set('after', after)
      const call = { method: 'GET' as const, path: `/batches?${query}`, headers: json }
      const result = await callJson(client, call, timeoutMs, apiKey)
      if (!result.ok) return result
      return { ok: true, value: listPage(result.value, toProviderBatch) }
    },
    getBatch: (id) => batchCall('GET', `/batches/${encodeURIComponent(id)}`),
    cancelBatch: (id) => batchCall('POST', `/batches/${encodeURIComponent(id)}/cancel`),
    readFile(fileId) {
      const path = `/files/${encodeURIComponent(fileId)}/content`
      return callText(client, { method: 'GET', path, headers: auth }, timeoutMs, apiKey)
    },
    close: () => client.close(),
  }
}
