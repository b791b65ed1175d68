/**
 * The batches role on PostgreSQL: admission (postgres-admit-batch.ts), the waits for credit
 * (postgres-credit-waits.ts) and for a start in time (postgres-start-in-time.ts), the delete of an
 * ended batch (postgres-delete-ended-batch.ts), and here the reads, the cancel and a facade batch
 * refused at validation. Every transaction that changes lines locks their batch first, then the
 * lines, then accounts (sql/0001_init.sql), so counters stay exact and instances never deadlock.
 * Reads add the batch's progress shards to its row (progressJoin).
 */
import type postgres from 'postgres'
import type { LineStatus } from '../../domain.ts'
import { finishBatches } from '../dispatch/postgres-advance-batches.ts'
import { progressJoin } from '../dispatch/postgres-batch-progress.ts'
import { withProgress } from '../dispatch/dispatch-rows.ts'
import { storableJson } from '../postgres/storable.ts'
import { enqueueWebhookEvents } from '../webhooks/postgres-webhooks.ts'
import { rowsToShares, rowToBatch, rowToLine } from './batch-rows.ts'
import type { BatchStore, CancelResult, RejectedBatch } from './batch-store.ts'
import { admitBatch } from './postgres-admit-batch.ts'
import { admitWaitingBatches } from './postgres-credit-waits.ts'
import { deleteEndedBatch } from './postgres-delete-ended-batch.ts'
import { failUnstartedBatches } from './postgres-start-in-time.ts'

// Times are bigint columns, and callers' times may carry fractions: "now" rounds down, so nothing
// happens sooner than asked (the dispatch role rounds stored deadlines up).
const earlier = Math.floor

/**
 * The batch store on PostgreSQL. `collectGarbage` is called every few megabytes of a batch's
 * COPY data (postgres-copy-lines.ts).
 */
export function createPostgresBatchStore(
  sql: postgres.Sql,
  options: { collectGarbage?: () => void } = {},
): BatchStore {
  return {
    admitBatch(batch) {
      return admitBatch(sql, batch, options.collectGarbage)
    },
    admitWaitingBatches(nowMs) {
      return admitWaitingBatches(sql, nowMs)
    },
    failUnstartedBatches(nowMs) {
      return failUnstartedBatches(sql, Math.floor(nowMs / 1000))
    },
    deleteEndedBatch(accountId, id, nowMs = Date.now()) {
      return deleteEndedBatch(sql, accountId, id, nowMs)
    },
    async recordRejectedBatch(batch: RejectedBatch) {
      return sql.begin(async (tx) => {
        // The account's lock, as admission takes it: an admission with the same key then either
        // committed before (and the insert below finds its key) or checks the key after us.
        await tx`SELECT 1 FROM accounts WHERE id = ${batch.accountId} FOR NO KEY UPDATE`
        const [row] = await tx`
        INSERT INTO batches (id, account_id, name, endpoint, status, completion_window_hours,
          created_at, deadline_at, finished_at, line_count, pending, cost_ceiling_usd, held_usd,
          source, metadata, input_file_id, errors, idempotency_key, request_hash)
        VALUES (${batch.id}, ${batch.accountId}, ${batch.name}, ${batch.endpoint}, 'failed',
          ${batch.completionWindowHours}, ${batch.createdAt},
          ${batch.createdAt + batch.completionWindowHours * 3600}, ${batch.createdAt}, 0, 0, 0, 0,
          ${batch.source}, ${batch.metadata ? sql.json(storableJson(batch.metadata)) : null},
          ${batch.inputFileId}, ${sql.json(storableJson(batch.errors))}, ${batch.idempotencyKey},
          ${batch.requestHash ?? null})
        ON CONFLICT (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
        RETURNING *`
        // A create racing one with its idempotency key: the batch that one made, as read.
        if (!row) {
          const [held] = await tx`
            SELECT b.*, p.* FROM batches b ${progressJoin(tx)}
            WHERE account_id = ${batch.accountId} AND idempotency_key = ${batch.idempotencyKey}`
          return rowToBatch(held!)
        }
        // Failed at once: its webhooks hear of it like any other failed batch.
        await enqueueWebhookEvents(
          tx,
          [{ id: batch.id, accountId: batch.accountId, status: 'failed' }],
          batch.createdAt,
        )
        return rowToBatch(row!)
      })
    },

    async findByIdempotencyKey(accountId: string, key: string) {
      const [row] = await sql`
        SELECT b.*, p.* FROM batches b ${progressJoin(sql)}
        WHERE account_id = ${accountId} AND idempotency_key = ${key}`
      return row ? rowToBatch(row) : null
    },

    async getBatch(accountId: string, id: string) {
      const [row] = await sql`
        SELECT b.*, p.* FROM batches b ${progressJoin(sql)}
        WHERE id = ${id} AND account_id = ${accountId}`
      return row ? rowToBatch(row) : null
    },

    async providerShares(batchIds: readonly string[]) {
      if (batchIds.length === 0) return new Map()
      const rows = await sql`
        SELECT * FROM batch_providers WHERE batch_id = ANY(${[...batchIds]}::text[])`
      return rowsToShares(rows)
    },

    async listBatches(accountId: string, page: { limit: number; after: string | null }) {
      const after = page.after ? sql`AND id < ${page.after}` : sql``
      const rows = await sql`
        SELECT b.*, p.* FROM batches b ${progressJoin(sql)}
        WHERE account_id = ${accountId} ${after}
        ORDER BY id DESC LIMIT ${page.limit + 1}`
      return {
        batches: rows.slice(0, page.limit).map(rowToBatch),
        hasMore: rows.length > page.limit,
      }
    },

    async cancelBatch(accountId: string, id: string, at: number): Promise<CancelResult> {
      const now = earlier(at)
      return sql.begin(async (tx): Promise<CancelResult> => {
        const [row] = await tx`
          SELECT b.*, p.* FROM batches b ${progressJoin(tx)}
          WHERE id = ${id} AND account_id = ${accountId} FOR UPDATE OF b`
        if (!row) return { kind: 'not_found' }
        if (row.status === 'cancelling')
          return { kind: 'cancelled', batch: rowToBatch(row), linesCancelled: 0 }
        if (row.status !== 'in_progress' && row.status !== 'validating') {
          return { kind: 'conflict', batch: rowToBatch(row) }
        }
        const [ended] = await tx`
          WITH cancelled AS (
            UPDATE lines SET status = 'cancelled', error_code = 'batch_cancelled',
              finished_at = ${now}
            WHERE batch_id = ${id} AND status = 'pending'
            RETURNING 1)
          UPDATE batches SET status = 'cancelling', cancel_requested_at = ${now},
            pending = pending - (SELECT count(*) FROM cancelled),
            cancelled = cancelled + (SELECT count(*) FROM cancelled)
          WHERE id = ${id}
          RETURNING (SELECT count(*) FROM cancelled)::int AS n`
        // Claims do not lock the row: the counters are read again once the pending lines are
        // ended, in a snapshot that holds any claim that took a line first.
        const [cancelling] = await tx`
          SELECT b.*, p.* FROM batches b ${progressJoin(tx)} WHERE id = ${id}`
        await finishBatches(tx, [withProgress(cancelling!)], now)
        const [latest] =
          await tx`SELECT b.*, p.* FROM batches b ${progressJoin(tx)} WHERE id = ${id}`
        return { kind: 'cancelled', batch: rowToBatch(latest!), linesCancelled: Number(ended!.n) }
      })
    },

    async readLines(
      batchId: string,
      query: { afterLineNo: number; limit: number; statuses: readonly LineStatus[] | null },
    ) {
      const filter = query.statuses ? sql`AND status = ANY(${[...query.statuses]}::text[])` : sql``
      const rows = await sql`
        SELECT * FROM lines WHERE batch_id = ${batchId} AND line_no > ${query.afterLineNo} ${filter}
        ORDER BY line_no LIMIT ${query.limit}`
      return rows.map(rowToLine)
    },
  }
}
