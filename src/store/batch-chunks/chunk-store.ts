/**
 * Chunk intents of the batch lanes (docs/batch-lanes.md; sql/0016_batch_chunks.sql). The lane engine writes
 * a chunk's intent, with its lines, before it uploads anything, then follows the provider batch
 * under a lease: only the lease holder changes a chunk, so two instances never poll, cancel or
 * map back the same provider batch, and a chunk whose holder died is taken over once its lease
 * runs out, from the ids stored here.
 *
 * Terminology: a *chunk* is one provider batch's worth of a Multigrid batch's lines; its
 * *position* n of a line is that line's upstream id, `mg-<n>`.
 */

/** Where a chunk is. Ordered: every state before `ended` is still followed. */
export const CHUNK_STATES = ['intent', 'submitted', 'cancelling', 'ended', 'abandoned'] as const
export type ChunkState = (typeof CHUNK_STATES)[number]

/** The states in which a chunk is no longer followed. */
export const FINISHED_CHUNK_STATES: readonly ChunkState[] = ['ended', 'abandoned']

/** A chunk as the engine writes it before its upload. */
/**
 * What a chunk's lines are: chat or embeddings requests; a Message Batch's Messages requests
 * (docs/clients/anthropic-sdk.md), which go to the provider as chat ones or as they came and are
 * kept as messages; or Responses requests (docs/clients/responses.md), which go as they came and
 * are kept as Responses.
 */
export type ChunkEndpoint = 'chat' | 'embeddings' | 'messages' | 'responses'

const CHUNK_ENDPOINTS: ReadonlySet<unknown> = new Set(['embeddings', 'messages', 'responses'])

export interface ChunkIntent {
  id: string
  batchId: string
  /** The offering's shown name ("openai:batch"). */
  offering: string
  /** The catalog's provider key. */
  provider: string
  upstreamModel: string
  endpoint: ChunkEndpoint
  /** The catalog model its lines name: its batch offering prices them. */
  model?: string
  /** Its batch's account, for the usage report. */
  accountId?: string
  /** deadline_at − fallback_hours of its batch (ms). */
  fallbackAtMs: number
  /** Line numbers of the Multigrid batch, in chunk order: position n is `lineNos[n - 1]`. */
  lineNos: number[]
  /** Each line's attempts, this chunk's included, in the same order; absent: 1 each. */
  attempts?: number[]
}

/** A chunk as stored. Times in ms. */
export interface ChunkRecord {
  id: string
  batchId: string
  offering: string
  provider: string
  upstreamModel: string
  endpoint: ChunkEndpoint
  /** Null in a chunk made before the column was (sql/0019_chunk_model.sql). */
  model: string | null
  accountId: string | null
  state: ChunkState
  fallbackAtMs: number
  inputFileId: string | null
  providerBatchId: string | null
  lineCount: number
  leaseOwner: string | null
  leaseUntil: number | null
  nextPollAt: number
  pollFailures: number
  error: string | null
  createdAt: number
  updatedAt: number
}

/** What the lease holder may change of a chunk; absent fields stay. */
export interface ChunkPatch {
  state?: ChunkState
  inputFileId?: string
  providerBatchId?: string
  nextPollAt?: number
  pollFailures?: number
  error?: string | null
  /**
   * When the provider refused the chunk as a whole (ms): it reached the provider, so its batch
   * has started (start-in-time.ts). Set once, with `abandoned`.
   */
  refusedAt?: number
}

/** Who holds a chunk, and until when (ms). */
export interface ChunkLease {
  owner: string
  untilMs: number
}

/** One line of a chunk. */
export interface ChunkLineRef {
  position: number
  lineNo: number
  attempts: number
}

/** The chunk store: one implementation a dialect, one contract (test/store/chunk-contract.ts). */
export interface ChunkStore {
  /**
   * Writes the intent and its lines at once, due for a first look now: under `lease` when given
   * (the instance about to upload it), else under none.
   */
  createChunk(intent: ChunkIntent, nowMs: number, lease?: ChunkLease): Promise<void>
  /**
   * Leases up to `limit` followed chunks that are due (next_poll_at ≤ now) and whose lease is
   * free or has run out, earliest due first; each goes to one caller only.
   */
  claimChunks(
    owner: string,
    limit: number,
    nowMs: number,
    leaseUntilMs: number,
  ): Promise<ChunkRecord[]>
  /** Changes a chunk the caller holds; false (and nothing changed) when it does not hold it. */
  updateChunk(owner: string, id: string, patch: ChunkPatch, nowMs: number): Promise<boolean>
  /** Gives the lease up, so the chunk can be taken at once when due. */
  releaseChunk(owner: string, id: string): Promise<boolean>
  /** The chunk's lines in position order. */
  chunkLines(id: string): Promise<ChunkLineRef[]>
  getChunk(id: string): Promise<ChunkRecord | null>
  /** The batch's chunks, oldest first (cancel, the batch page). */
  chunksOfBatch(batchId: string): Promise<ChunkRecord[]>
  /** Asks every still-followed chunk of the batch to be cancelled at its next look: due now. */
  requestCancel(batchId: string, nowMs: number): Promise<number>
  /** The chunk that follows this provider batch, if any (to tell a lost copy from a chunk's own). */
  chunkOfProviderBatch(provider: string, providerBatchId: string): Promise<string | null>
  /** The still-followed chunks of these batches, summed per batch and offering (what is shown). */
  openChunks(batchIds: readonly string[]): Promise<OpenChunks[]>
}

/** A batch's lines inside provider batches of one offering, as shown on the batch object. */
export interface OpenChunks {
  batchId: string
  offering: string
  chunks: number
  lines: number
  /** The earliest fallback time among them (ms). */
  fallbackAtMs: number
}

export const rowToOpenChunks = (row: Row): OpenChunks => ({
  batchId: String(row.batch_id),
  offering: String(row.offering),
  chunks: Number(row.chunks),
  lines: Number(row.lines),
  fallbackAtMs: Number(row.fallback_at),
})

type Row = Record<string, unknown>

const orNull = <T>(value: unknown, map: (v: unknown) => T): T | null =>
  value === null || value === undefined ? null : map(value)

/** A row of either dialect (bigint columns arrive as strings from PostgreSQL) → a record. */
export function rowToChunk(row: Row): ChunkRecord {
  return {
    id: String(row.id),
    batchId: String(row.batch_id),
    offering: String(row.offering),
    provider: String(row.provider),
    upstreamModel: String(row.upstream_model),
    endpoint: CHUNK_ENDPOINTS.has(row.endpoint) ? (row.endpoint as ChunkEndpoint) : 'chat',
    model: orNull(row.model, String),
    accountId: orNull(row.account_id, String),
    state: String(row.state) as ChunkState,
    fallbackAtMs: Number(row.fallback_at),
    inputFileId: orNull(row.input_file_id, String),
    providerBatchId: orNull(row.provider_batch_id, String),
    lineCount: Number(row.line_count),
    leaseOwner: orNull(row.lease_owner, String),
    leaseUntil: orNull(row.lease_until, Number),
    nextPollAt: Number(row.next_poll_at),
    pollFailures: Number(row.poll_failures),
    error: orNull(row.error, String),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  }
}
