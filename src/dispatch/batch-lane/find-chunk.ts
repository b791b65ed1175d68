/**
 * Finding a create a crash cut off (docs/batch-lanes.md): OpenAI's list of batches, newest first, read page
 * by page for the chunk's `metadata.mg_chunk`. Bounded: a create is looked for within minutes of
 * its intent, so it is among the newest; 10 pages of 100 reach far past that.
 *
 * Anthropic's batches carry nothing of the chunk's: a copy is recognised by its time (created
 * between the intent and the end of the create's timeout), its size (at most the chunk's lines)
 * and no chunk following it. Such a copy is cancelled, never adopted: its results could be
 * another chunk's.
 */
import type {
  AnthropicBatchClient,
  AnthropicBatchSummary,
  BatchCall,
  OpenAIBatchClient,
  ProviderBatch,
} from '../../../providers/batch-api/index.ts'

export const FIND_PAGES = 10

export async function findChunk(
  client: Pick<OpenAIBatchClient, 'list'>,
  chunkId: string,
): Promise<BatchCall<ProviderBatch | null>> {
  let after: string | null = null
  for (let page = 0; page < FIND_PAGES; page++) {
    const listed = await client.list(after, 100)
    if (!listed.ok) return listed
    const found = listed.value.batches.find((batch) => batch.chunkId === chunkId)
    if (found) return { ok: true, value: found }
    if (!listed.value.hasMore || listed.value.lastId === null) break
    after = listed.value.lastId
  }
  return { ok: true, value: null }
}

/** What a lost Anthropic create of a chunk looks like. */
export interface CopyTraits {
  /** The chunk intent's time and the latest its create could have reached the provider (ms). */
  fromMs: number
  toMs: number
  /** The chunk's lines: the copy has as many or fewer (refused lines were not sent). */
  maxRequests: number
  /** Whether a chunk follows this provider batch. */
  followed(providerBatchId: string): Promise<boolean>
}

/** The not yet ended Anthropic batches that look like a lost create of the chunk. */
export async function findAnthropicCopies(
  client: Pick<AnthropicBatchClient, 'list'>,
  traits: CopyTraits,
): Promise<BatchCall<AnthropicBatchSummary[]>> {
  const copies: AnthropicBatchSummary[] = []
  let after: string | null = null
  for (let page = 0; page < FIND_PAGES; page++) {
    const listed = await client.list(after, 100)
    if (!listed.ok) return listed
    for (const batch of listed.value.batches) {
      if (batch.createdAtMs === null || batch.status.unified === 'ended') continue
      if (batch.createdAtMs < traits.fromMs || batch.createdAtMs > traits.toMs) continue
      if (batch.requests < 1 || batch.requests > traits.maxRequests) continue
      if (!(await traits.followed(batch.id))) copies.push(batch)
    }
    // Newest first: past the intent's time nothing older can be its copy.
    const oldest = listed.value.batches.at(-1)?.createdAtMs ?? null
    if (oldest !== null && oldest < traits.fromMs) break
    if (!listed.value.hasMore || listed.value.lastId === null) break
    after = listed.value.lastId
  }
  return { ok: true, value: copies }
}
