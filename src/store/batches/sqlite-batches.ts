/**
 * The batches role on bun:sqlite: admission (sqlite-admit-batch.ts), the waits for credit
 * (sqlite-credit-waits.ts) and for a start in time (sqlite-start-in-time.ts), and here the reads,
 * the cancel, the delete of an ended batch and a facade batch refused at validation. Every change
 * runs in one IMMEDIATE transaction; reads add the batch's progress shards to its row.
 */
import type { LineStatus } from '../../domain.ts'
import { moneyText } from '../../money/decimal.ts'
import { sqliteQuery as q, type Row, type SqliteConnection } from '../connection.ts'
import { deletedBatchDailyUse, liveSpentOn, utcDay } from '../credit/daily-spend.ts'
import { current, readCurrent } from '../dispatch/sqlite-batch-progress.ts'
import { finishBatch } from '../dispatch/sqlite-finish-batch.ts'
import { enqueueWebhookEvents } from '../webhooks/sqlite-webhooks.ts'
import { rowsToShares, rowToBatch, rowToLine } from './batch-rows.ts'
import type { BatchStore, CancelResult, RejectedBatch } from './batch-store.ts'
import { admitBatch } from './sqlite-admit-batch.ts'
import * as creditWaits from './sqlite-credit-waits.ts'
import * as startInTime from './sqlite-start-in-time.ts'

/** The batch store on bun:sqlite. */
export function createSqliteBatchStore(db: SqliteConnection): BatchStore {
  const tx = <T>(fn: () => T): T => db.transaction(fn).immediate()
  return {
    async admitBatch(batch) {
      return admitBatch(db, batch)
    },
    async admitWaitingBatches(nowMs) {
      // A read first: every instance runs this every second, and the write lock is the dispatcher's.
      if (!creditWaits.anyWaiting(db)) return { started: [], failed: [], failedLines: 0 }
      return tx(() => creditWaits.admitWaitingBatches(db, nowMs))
    },
    async failUnstartedBatches(nowMs) {
      const now = Math.floor(nowMs / 1000)
      // A read first, as for the credit waits: the write lock is the dispatcher's.
      if (!startInTime.anyUnstarted(db, now)) return { failed: [], lines: 0 }
      return tx(() => startInTime.failUnstartedBatches(db, now))
    },
    async recordRejectedBatch(batch) {
      return tx(() => {
        // A create racing one with its idempotency key: the batch that one made, as read.
        if (!insertRejectedBatch(db, batch)) {
          const [held] = readCurrent(db, () =>
            q(db, 'SELECT * FROM batches WHERE account_id = ? AND idempotency_key = ?').all(
              batch.accountId,
              batch.idempotencyKey,
            ),
          )
          return rowToBatch(held!)
        }
        // Failed at once: its webhooks hear of it like any other failed batch.
        enqueueWebhookEvents(
          db,
          { id: batch.id, accountId: batch.accountId, status: 'failed' },
          batch.createdAt,
        )
        return rowToBatch(q(db, 'SELECT * FROM batches WHERE id = ?').get(batch.id)!)
      })
    },
    async deleteEndedBatch(accountId, id, nowMs = Date.now()) {
      return tx(() => deleteEndedBatch(db, accountId, id, nowMs))
    },
    async findByIdempotencyKey(accountId, key) {
      const [row] = readCurrent(db, () =>
        q(db, 'SELECT * FROM batches WHERE account_id = ? AND idempotency_key = ?').all(
          accountId,
          key,
        ),
      )
      return row ? rowToBatch(row) : null
    },
    async getBatch(accountId, id) {
      const [row] = readCurrent(db, () =>
        q(db, 'SELECT * FROM batches WHERE id = ? AND account_id = ?').all(id, accountId),
      )
      return row ? rowToBatch(row) : null
    },
    async providerShares(batchIds) {
      if (batchIds.length === 0) return new Map()
      const rows = q(
        db,
        `SELECT * FROM batch_providers WHERE batch_id IN (${batchIds.map(() => '?').join(', ')})`,
      ).all(...batchIds)
      return rowsToShares(rows)
    },
    async listBatches(accountId, page) {
      const rows = readCurrent(db, () =>
        page.after
          ? q(
              db,
              'SELECT * FROM batches WHERE account_id = ? AND id < ? ORDER BY id DESC LIMIT ?',
            ).all(accountId, page.after, page.limit + 1)
          : q(db, 'SELECT * FROM batches WHERE account_id = ? ORDER BY id DESC LIMIT ?').all(
              accountId,
              page.limit + 1,
            ),
      )
      return {
        batches: rows.slice(0, page.limit).map(rowToBatch),
        hasMore: rows.length > page.limit,
      }
    },
    async cancelBatch(accountId, id, now) {
      return tx(() => cancelBatch(db, accountId, id, now))
    },
    async readLines(batchId, query) {
      return readLines(db, batchId, query)
    },
  }
}

/** False when a batch already holds its idempotency key: nothing is inserted then. */
function insertRejectedBatch(db: SqliteConnection, batch: RejectedBatch): boolean {
  const { changes } = q(
    db,
    `INSERT INTO batches (id, account_id, name, endpoint, status, completion_window_hours,
       created_at, deadline_at, finished_at, line_count, pending, cost_ceiling_usd, held_usd,
       source, metadata, input_file_id, errors, idempotency_key, request_hash)
     VALUES (?, ?, ?, ?, 'failed', ?, ?, ?, ?, 0, 0, '0', '0', ?, ?, ?, ?, ?, ?)
     ON CONFLICT (account_id, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING`,
  ).run(
    batch.id,
    batch.accountId,
    batch.name,
    batch.endpoint,
    batch.completionWindowHours,
    batch.createdAt,
    batch.createdAt + batch.completionWindowHours * 3600,
    batch.createdAt,
    batch.source,
    batch.metadata ? JSON.stringify(batch.metadata) : null,
    batch.inputFileId,
    JSON.stringify(batch.errors),
    batch.idempotencyKey,
    batch.requestHash ?? null,
  )
  return changes > 0
}

/** Inside the caller's transaction: the ended batch with its lines, files, shares and deliveries. */
function deleteEndedBatch(
  db: SqliteConnection,
  accountId: string,
  id: string,
  nowMs: number,
): boolean {
  const found = q(
    db,
    'SELECT * FROM batches WHERE id = ? AND account_id = ? AND finished_at IS NOT NULL',
  ).get(id, accountId)
  if (!found) return false
  keepDailyUse(db, accountId, found, nowMs)
  q(db, 'DELETE FROM lines WHERE batch_id = ?').run(id)
  q(db, 'DELETE FROM files WHERE batch_id = ?').run(id)
  q(db, 'DELETE FROM webhook_deliveries WHERE batch_id = ?').run(id)
  q(db, 'DELETE FROM batch_providers WHERE batch_id = ?').run(id)
  // None should be left once it ended (folded); none may outlive it either way.
  q(db, 'DELETE FROM batch_progress WHERE batch_id = ?').run(id)
  q(db, 'DELETE FROM batches WHERE id = ?').run(id)
  return true
}

/** A deleted batch admitted today still counts against the daily limit (daily-spend.ts). */
function keepDailyUse(db: SqliteConnection, accountId: string, batch: Row, nowMs: number) {
  const use = deletedBatchDailyUse(batch, nowMs)
  if (use.isZero()) return
  const account = q(db, 'SELECT live_spend_day, live_spent_usd FROM accounts WHERE id = ?').get(
    accountId,
  )!
  q(db, 'UPDATE accounts SET live_spend_day = ?, live_spent_usd = ? WHERE id = ?').run(
    utcDay(nowMs),
    moneyText(liveSpentOn(account, nowMs).plus(use)),
    accountId,
  )
}

/** Inside the caller's transaction: pending lines end cancelled, then the batch if it is idle. */
function cancelBatch(db: SqliteConnection, accountId: string, id: string, now: number) {
  const row = current(
    db,
    q(db, 'SELECT * FROM batches WHERE id = ? AND account_id = ?').get(id, accountId),
  )
  if (!row) return { kind: 'not_found' } satisfies CancelResult
  if (row.status === 'cancelling')
    return { kind: 'cancelled', batch: rowToBatch(row), linesCancelled: 0 } as const
  if (row.status !== 'in_progress' && row.status !== 'validating') {
    return { kind: 'conflict', batch: rowToBatch(row) } as const
  }
  const cancelled = q(
    db,
    `UPDATE lines SET status = 'cancelled', error_code = 'batch_cancelled', finished_at = ?
     WHERE batch_id = ? AND status = 'pending'`,
  ).run(now, id).changes
  q(
    db,
    `UPDATE batches SET status = 'cancelling', cancel_requested_at = ?, pending = pending - ?,
       cancelled = cancelled + ? WHERE id = ?`,
  ).run(now, cancelled, cancelled, id)
  finishBatch(db, id, now)
  return {
    kind: 'cancelled',
    batch: rowToBatch(current(db, q(db, 'SELECT * FROM batches WHERE id = ?').get(id))!),
    linesCancelled: cancelled,
  } as const
}

function readLines(
  db: SqliteConnection,
  batchId: string,
  query: { afterLineNo: number; limit: number; statuses: readonly LineStatus[] | null },
) {
  const filter = query.statuses ? `AND status IN (${query.statuses.map(() => '?').join(', ')})` : ''
  const rows = q(
    db,
    `SELECT * FROM lines WHERE batch_id = ? AND line_no > ? ${filter} ORDER BY line_no LIMIT ?`,
  ).all(batchId, query.afterLineNo, ...(query.statuses ?? []), query.limit)
  return rows.map(rowToLine)
}
