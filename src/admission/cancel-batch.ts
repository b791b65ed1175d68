/** Cancelling a batch, the same on both surfaces: 404 as if missing, 409 once it has ended. */
import { nowSeconds, type BatchRecord } from '../domain.ts'
import { notFound, refuse } from '../errors.ts'
import { excerpt } from '../excerpt.ts'
import type { BatchStore } from '../store/store.ts'

export async function cancelBatch(
  store: BatchStore,
  accountId: string,
  batchId: string,
  onCancelled?: (batchId: string) => void,
): Promise<BatchRecord> {
  const result = await store.cancelBatch(accountId, batchId, nowSeconds())
  if (result.kind === 'not_found') throw notFound(`batch ${excerpt(batchId)}`)
  if (result.kind === 'conflict') {
    throw refuse(
      'batch_not_cancellable',
      `batch ${batchId} is ${result.batch.status} and can no longer be cancelled`,
      { detail: { status: result.batch.status } },
    )
  }
  // This instance's dispatcher hears at once, so lines waiting for a slot are not sent.
  onCancelled?.(batchId)
  return result.batch
}
