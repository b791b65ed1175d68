/**
 * Ending a batch before any line ran, on PostgreSQL: every pending line failed unbilled with the
 * reason, and the batch `failed` with it as its error, its own hold set to nothing (and no
 * start: lines claimed and handed back unsent did not start it). The caller holds the batch's
 * row and its pending lines, and settles the account's hold and webhooks. Returns how many lines
 * failed.
 */
import type postgres from 'postgres'
import { foldedColumns, foldedShards } from '../dispatch/postgres-batch-progress.ts'

export async function failUnstartedBatch(
  tx: postgres.TransactionSql,
  failure: { batchId: string; code: string; message: string; now: number },
): Promise<number> {
  const { batchId, code, message, now } = failure
  // Lines taken up and handed back left shards (netting to nothing): folded, as at any end.
  await tx`
    WITH ${foldedShards(tx, [batchId])}
    UPDATE batches b SET ${foldedColumns(tx)}
    FROM folded f WHERE b.id = f.batch_id`
  const ended = await tx`
    UPDATE lines SET status = 'failed', error_code = ${code},
      error_message = ${message}, cost_usd = 0, finished_at = ${now}
    WHERE batch_id = ${batchId} AND status = 'pending'`
  const errors = [{ code, message, param: null, line: null }]
  await tx`
    UPDATE batches SET status = 'failed', pending = pending - ${ended.count},
      failed = failed + ${ended.count}, finished_at = ${now}, started_at = NULL, held_usd = 0,
      waiting_code = NULL, waiting_message = NULL, waiting_until = NULL,
      errors = ${tx.json(errors)}
    WHERE id = ${batchId}`
  return ended.count
}
