/** Cancelling a batch, the same on both surfaces: 404 as if missing, 409 once it has ended. */
import { nowSeconds, type BatchRecord } from '../domain.ts'
import { notFound, refuse } from '../errors.ts'
import { excerpt } from '../excerpt.ts'
import type { BatchStore } from '../store/store.ts'

export async function cancelBatch(
  store: BatchStore,
  accountId: string,
  batchId: string,
  options: {
    onCancelled?: (batchId: string, linesCancelled: number) => void
    /** The status as the surface asked shows it (the facade's are OpenAI's). */
    statusOf?: (batch: BatchRecord) => string
  } = {},
): Promise<BatchRecord> {
  const result = await store.cancelBatch(accountId, batchId, nowSeconds())
  if (result.kind === 'not_found') throw notFound(`batch ${excerpt(batchId)}`)
  if (result.kind === 'conflict') {
    const status = options.statusOf?.(result.batch) ?? result.batch.status
    throw refuse(
      'batch_not_cancellable',
      `batch ${batchId} is ${status} and can no longer be cancelled`,
      { detail: { status } },
    )
  }
  // This instance's dispatcher hears at once, so lines waiting for a slot are not sent.
  options.onCancelled?.(batchId, result.linesCancelled)
  return result.batch
}
