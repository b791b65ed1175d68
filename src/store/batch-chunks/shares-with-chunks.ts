/**
 * `routing.providers` with the batch lanes' lines in (docs/batch-lanes.md): the lines waiting inside a
 * batch lane's provider batches count as running there, with how many provider batches hold them
 * and when the live lanes take over. Read from the chunk store beside the batch's own shares.
 */
import type { ProviderShare } from '../../domain.ts'
import type { BatchStore } from '../batches/batch-store.ts'
import type { ChunkStore } from './chunk-store.ts'

type Shares = BatchStore['providerShares']

/** providerShares of `shares`, with the open chunks of the same batches added. */
export function sharesWithChunks(shares: Shares, chunks: Pick<ChunkStore, 'openChunks'>): Shares {
  return async (batchIds) => {
    const [byBatch, open] = await Promise.all([shares(batchIds), chunks.openChunks(batchIds)])
    for (const entry of open) {
      let batch = byBatch.get(entry.batchId)
      if (!batch) byBatch.set(entry.batchId, (batch = {}))
      const share: ProviderShare = (batch[entry.offering] ??= {
        succeeded: 0,
        failed: 0,
        running: 0,
        costUsd: '0',
      })
      share.running += entry.lines
      share.providerBatches = {
        count: entry.chunks,
        fallbackAt: Math.floor(entry.fallbackAtMs / 1000),
      }
    }
    return byBatch
  }
}

/** The store as the batch routes read it: providerShares with the open chunks, the rest as is. */
export function withChunkShares<S extends Pick<BatchStore, 'providerShares'>>(
  store: S,
  chunks: Pick<ChunkStore, 'openChunks'>,
): S {
  const providerShares = sharesWithChunks(store.providerShares.bind(store), chunks)
  return new Proxy(store, {
    get(target, key) {
      if (key === 'providerShares') return providerShares
      const value = Reflect.get(target, key, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}
