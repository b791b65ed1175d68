/**
 * Finding a create a crash cut off (docs/batch-lanes.md): OpenAI's list of batches, newest first, read page
 * by page for the chunk's `metadata.mg_chunk`. Bounded: a create is looked for within minutes of
 * its intent, so it is among the newest; 10 pages of 100 reach far past that.
 */
import type {
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
