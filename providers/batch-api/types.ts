/**
 * The spec of the providers' batch APIs (docs/batch-lanes.md): what the lane engine hands a batch client and
 * what it gets back. Like the live adapters, a client makes one HTTP call per method and returns
 * an outcome; it never retries, prices, persists or schedules.
 *
 * Terminology: a *chunk* is the gateway's group of lines sent as one provider batch; a line's
 * *upstream id* is `mg-<n>`, n its 1-based position within the chunk, never the user's custom_id.
 */
import type { Endpoint, MaxTokensParam, UpstreamError, Usage } from '../types.ts'
import type { ModelLimits } from '../types.ts'

/** One line of a chunk, as the gateway validated it. */
export interface ChunkLine {
  /** 1-based position within the chunk; the upstream id is `mg-<position>`. */
  position: number
  body: Record<string, unknown>
  /**
   * The request in the provider's own API, sent as it came in place of `body` (its chat
   * translation): a Message Batch's Messages request to an Anthropic batch
   * (docs/clients/anthropic-sdk.md), a Responses request to an OpenAI one (docs/clients/responses.md).
   */
  native?: Record<string, unknown>
}

/**
 * The endpoint a chunk's lines go to: chat or embeddings, or OpenAI's Responses API, whose lines
 * go as they came (`native`).
 */
export type ChunkApiEndpoint = Endpoint | 'responses'

/** A chunk to send: one upstream model and one endpoint (docs/batch-lanes.md grouping). */
export interface ChunkRequest {
  /** The gateway's chunk id, carried as `metadata.mg_chunk` (OpenAI) to find a create again. */
  chunkId: string
  endpoint: ChunkApiEndpoint
  /** The offering's `upstream_model`. */
  model: string
  maxTokensParam?: MaxTokensParam
  /** The model's limits, for a body that sets no output limit where the API requires one (Anthropic). */
  modelLimits?: ModelLimits
  lines: ChunkLine[]
}

/** A provider batch's state, unified, with the provider's own word for it. */
export interface ProviderBatchStatus {
  unified: 'running' | 'cancelling' | 'ended' | 'failed'
  raw: string
}

/** A provider batch as last read. */
export interface ProviderBatch {
  id: string
  status: ProviderBatchStatus
  /** OpenAI: the files written when it ended (null before, or when there is nothing in one). */
  outputFileId: string | null
  errorFileId: string | null
  /** The chunk id it was created for (OpenAI metadata), when it says. */
  chunkId: string | null
  /** OpenAI's `errors` of a failed batch: its first code (`token_limit_exceeded`). */
  failureCode: string | null
}

/** What became of one line of a provider batch (docs/batch-lanes.md mapping back). */
export type ChunkLineResult =
  | {
      position: number
      type: 'succeeded'
      /** OpenAI-shaped (chat.completion or embeddings list), as a live call's body. */
      body: Record<string, unknown>
      /** The provider's own answer (Anthropic's message, a Response), as it came. */
      native?: Record<string, unknown>
      usage: Usage | null
    }
  /** The provider answered the line with an error: the live retry rules apply to it. */
  | { position: number; type: 'errored'; error: UpstreamError }
  /** Not run (cancelled or expired upstream): back to pending without an attempt. */
  | { position: number; type: 'canceled' | 'expired' }

/** One call's result: its value, or the failure of the call itself (not of a line). */
export type BatchCall<T> = { ok: true; value: T } | { ok: false; error: UpstreamError }

/** A page of provider batches, newest first. */
export interface BatchPage {
  batches: ProviderBatch[]
  hasMore: boolean
  /** Pass as `after` for the next page. */
  lastId: string | null
}

/** What both kinds' clients have: read and cancel a provider batch, and the provider's caps. */
export interface BatchClientBase {
  readonly name: string
  /** Most lines and bytes of one provider batch (OpenAI 50,000 / 200 MB, Anthropic 100,000 / 256 MB). */
  readonly maxLines: number
  readonly maxBytes: number
  getBatch(id: string): Promise<BatchCall<ProviderBatch>>
  cancelBatch(id: string): Promise<BatchCall<ProviderBatch>>
  close(): Promise<void>
}

/** What a batch client needs; resolved from the catalog and the environment by the caller. */
export interface BatchClientOptions {
  name: string
  /** OpenAI: ends in /v1; Anthropic: the host (a trailing /v1 is accepted). */
  baseUrl: string
  apiKey: string | null
  /** Per call. */
  timeoutMs: number
}
