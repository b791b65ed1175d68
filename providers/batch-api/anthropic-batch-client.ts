/**
 * Anthropic's Message Batches API (docs/batch-lanes.md): create with the chunk's requests, read, read the
 * results once ended, cancel, list. One HTTP call a method; failures as values. Anthropic
 * batches carry no metadata, so a create a crash cut off cannot be adopted: the list only serves
 * to recognise such a copy, so that it is cancelled (docs/batch-lanes.md).
 */
import { createHttpClient } from '../http-client.ts'
import { upstreamError } from '../classify-error.ts'
import { prepareAnthropicBody } from '../anthropic/prepare-anthropic-body.ts'
import { prepareForOffering } from '../prepare-for-offering.ts'
import { callJson, callText, listPage, upstreamIdOf } from './batch-http.ts'
import type {
  BatchCall,
  BatchClientBase,
  BatchClientOptions,
  ChunkLineResult,
  ChunkRequest,
  ProviderBatch,
  ProviderBatchStatus,
} from './types.ts'

export const ANTHROPIC_MAX_LINES = 100_000
export const ANTHROPIC_MAX_BYTES = 256 * 1024 * 1024
const anthropicVersion = '2023-06-01'

/** The chunk's requests as Anthropic wants them, and the lines the translation refused. */
export interface AnthropicBatchInput {
  /** The create body's text. */
  body: string
  /** Lines not sent (an embeddings line, a body that does not convert): final failures. */
  refused: ChunkLineResult[]
}

/** A message batch as its list shows it: enough to recognise a copy a crash left unobserved. */
export interface AnthropicBatchSummary {
  id: string
  status: ProviderBatchStatus
  /** Unix ms; null when the provider sent none. */
  createdAtMs: number | null
  /** Its requests, every state counted. */
  requests: number
}

/** The Anthropic batch client: the base methods plus create, results and list. */
export interface AnthropicBatchClient extends BatchClientBase {
  readonly kind: 'anthropic'
  create(input: AnthropicBatchInput): Promise<BatchCall<ProviderBatch>>
  /** The results JSONL of an ended batch. */
  readResults(id: string): Promise<BatchCall<string>>
  /** One page of the key's message batches, newest first; `afterId`: the last id of the page before. */
  list(
    afterId: string | null,
    limit?: number,
  ): Promise<
    BatchCall<{ batches: AnthropicBatchSummary[]; hasMore: boolean; lastId: string | null }>
  >
}

/** Builds the create body; each line converted exactly as the live adapter converts it. */
export function anthropicBatchInput(
  chunk: ChunkRequest,
  providerName: string,
): AnthropicBatchInput {
  const target = {
    model: chunk.model,
    maxTokensParam: chunk.maxTokensParam,
    modelLimits: chunk.modelLimits,
  }
  const requests: { custom_id: string; params: Record<string, unknown> }[] = []
  const refused: ChunkLineResult[] = []
  const send = { stream: false, providerName }
  const endpoint = chunk.endpoint
  for (const line of chunk.lines) {
    if (endpoint === 'responses') {
      const error = upstreamError(
        'invalid_request',
        "Anthropic's batch API takes no Responses requests",
      )
      refused.push({ position: line.position, type: 'errored', error })
      continue
    }
    if (line.native) {
      // A Messages request goes as it came, with the offering's model id (messages-calls.ts).
      const params = prepareForOffering(line.native, target, ['stream'])
      requests.push({ custom_id: upstreamIdOf(line.position), params })
      continue
    }
    const converted = prepareAnthropicBody(endpoint, line.body, target, send)
    if (!converted.ok) {
      const error = upstreamError('invalid_request', converted.message)
      refused.push({ position: line.position, type: 'errored', error })
    } else requests.push({ custom_id: upstreamIdOf(line.position), params: converted.body })
  }
  return { body: JSON.stringify({ requests }), refused }
}

function statusOf(raw: string): ProviderBatchStatus {
  if (raw === 'ended') return { unified: 'ended', raw }
  if (raw === 'canceling') return { unified: 'cancelling', raw }
  return { unified: 'running', raw }
}

/** A message batch in the spec's terms. */
export function toProviderBatch(json: Record<string, unknown>): ProviderBatch {
  return {
    id: String(json.id),
    status: statusOf(String(json.processing_status)),
    outputFileId: null,
    errorFileId: null,
    chunkId: null,
    failureCode: null,
  }
}

function toSummary(json: Record<string, unknown>): AnthropicBatchSummary {
  const counts = (json.request_counts ?? {}) as Record<string, unknown>
  const requests = Object.values(counts).reduce<number>((sum, n) => sum + (Number(n) || 0), 0)
  const created = typeof json.created_at === 'string' ? Date.parse(json.created_at) : NaN
  return {
    id: String(json.id),
    status: statusOf(String(json.processing_status)),
    createdAtMs: Number.isFinite(created) ? created : null,
    requests,
  }
}

/** A client for kind `anthropic`; the base URL names the host (a trailing /v1 is accepted). */
export function createAnthropicBatchClient(options: BatchClientOptions): AnthropicBatchClient {
  const base = options.baseUrl.replace(/\/+$/, '').replace(/\/v1$/, '')
  const client = createHttpClient(base, { connections: 4, connectTimeoutMs: 10_000 })
  const headers: Record<string, string> = {
    'anthropic-version': anthropicVersion,
    'content-type': 'application/json',
  }
  if (options.apiKey) headers['x-api-key'] = options.apiKey
  const { timeoutMs, apiKey } = options
  const prefix = '/v1/messages/batches'

  const batchCall = async (method: 'GET' | 'POST', path: string, body?: string) => {
    const result = await callJson(client, { method, path, headers, body }, timeoutMs, apiKey)
    return result.ok ? { ok: true as const, value: toProviderBatch(result.value) } : result
  }

  return {
    kind: 'anthropic',
    name: options.name,
    maxLines: ANTHROPIC_MAX_LINES,
    maxBytes: ANTHROPIC_MAX_BYTES,
    create: (input) => batchCall('POST', prefix, input.body),
    getBatch: (id) => batchCall('GET', `${prefix}/${encodeURIComponent(id)}`),
    cancelBatch: (id) => batchCall('POST', `${prefix}/${encodeURIComponent(id)}/cancel`),
    readResults(id) {
      const path = `${prefix}/${encodeURIComponent(id)}/results`
      return callText(client, { method: 'GET', path, headers }, timeoutMs, apiKey)
    },
    async list(afterId, limit = 100) {
      const query = new URLSearchParams({ limit: String(limit) })
      if (afterId !== null) query.set('after_id', afterId)
      const call = { method: 'GET' as const, path: `${prefix}?${query}`, headers }
      const result = await callJson(client, call, timeoutMs, apiKey)
      if (!result.ok) return result
      return { ok: true, value: listPage(result.value, toSummary) }
    },
    close: () => client.close(),
  }
}
