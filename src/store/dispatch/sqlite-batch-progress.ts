/**
 * A batch's progress off its row on the embedded store, in the same shape as PostgreSQL's
 * (postgres-batch-progress.ts, docs/scale.md): claims, settlements and lines handed
 * back add what they moved to a shard row of `batch_progress`; reads add the shards to the row;
 * the end of the batch folds them into it. SQLite has one writer, so nothing contends here
 * either way: the point is one code shape and one set of contract tests for both stores. Money is
 * decimal TEXT, so the shards' money is summed with decimal.js, never by SQL.
 */
import type { SqliteConnection as Database } from '../connection.ts'
import { Money, moneyText } from '../../money/decimal.ts'
import { withProgress } from './dispatch-rows.ts'
import { PROGRESS_COUNTS, PROGRESS_MONEY } from './progress-shards.ts'

type Row = Record<string, any>

const COUNTS = PROGRESS_COUNTS
const MONEY = PROGRESS_MONEY

/** What one write moves: counts as numbers, money as Money (or decimal text); absent is 0. */
export type ProgressDelta = Partial<Record<(typeof COUNTS)[number], number>> &
  Partial<Record<(typeof MONEY)[number], Money | string>>

/** Batch `b`'s current value of an integer counter, in SQL (the row plus its shards). */
export const currentCount = (column: 'pending' | 'running') =>
  `(b.${column} + coalesce((SELECT sum(${column}) FROM batch_progress p WHERE p.batch_id = b.id), 0))`

/** Adds `delta` to `shard`'s row of the batch, inside the caller's transaction. */
export function addProgress(db: Database, batchId: string, shard: string, delta: ProgressDelta) {
  const before = db
    .query<Row, [string, string]>('SELECT * FROM batch_progress WHERE batch_id = ? AND shard = ?')
    .get(batchId, shard)
  const counts = COUNTS.map((column) => Number(before?.[column] ?? 0) + (delta[column] ?? 0))
  const money = MONEY.map((column) =>
    moneyText(new Money(before?.[column] ?? '0').plus(delta[column] ?? '0')),
  )
  db.query(
    `INSERT OR REPLACE INTO batch_progress (batch_id, shard, ${COUNTS.join(', ')},
       ${MONEY.join(', ')}, changes) VALUES (${Array(COUNTS.length + MONEY.length + 3)
         .fill('?')
         .join(', ')})`,
  ).run(batchId, shard, ...counts, ...money, Number(before?.changes ?? 0) + 1)
}

/** The sums of a batch's shards as `p_<column>` (dispatch-rows.ts adds them), or null when it has none. */
function shardSums(db: Database, batchId: string): Row | null {
  const shards = db
    .query<Row, [string]>('SELECT * FROM batch_progress WHERE batch_id = ?')
    .all(batchId)
  if (shards.length === 0) return null
  const sums: Row = { p_changes: 0 }
  for (const column of COUNTS) sums[`p_${column}`] = 0
  for (const column of MONEY) sums[`p_${column}`] = new Money(0)
  for (const shard of shards) {
    sums.p_changes += Number(shard.changes)
    for (const column of COUNTS) sums[`p_${column}`] += Number(shard[column])
    for (const column of MONEY) sums[`p_${column}`] = sums[`p_${column}`].plus(shard[column])
  }
  for (const column of MONEY) sums[`p_${column}`] = moneyText(sums[`p_${column}`])
  return sums
}

/** A batch row with its shards added (withProgress); null stays null. */
export function current(db: Database, row: Row | null): Row | null {
  if (!row) return null
  const sums = shardSums(db, row.id)
  return sums ? withProgress({ ...row, ...sums }) : row
}

/**
 * Deletes the batch's shards and answers its row (as stored, without them) with them added, version included,
 * for the UPDATE that gives the batch its terminal status (finishBatch). Nothing writes a shard
 * of a batch with no line pending or running.
 */
export function foldProgress(db: Database, row: Row): Row {
  const folded = current(db, row)!
  db.query('DELETE FROM batch_progress WHERE batch_id = ?').run(row.id)
  return folded
}

/**
 * Folds the batch's shards into its row now, outside finishBatch (a batch failed before any line
 * of it started, whose lines were taken up and handed back): an ended batch is its row alone.
 */
export function foldIntoRow(db: Database, batchId: string): void {
  const stored = db.query<Row, [string]>('SELECT * FROM batches WHERE id = ?').get(batchId)
  if (!stored || !shardSums(db, batchId)) return
  const f = foldProgress(db, stored)
  db.query(
    `UPDATE batches SET ${[...COUNTS, ...MONEY].map((column) => `${column} = ?`).join(', ')},
       version = ? WHERE id = ?`,
  ).run(
    ...COUNTS.map((column) => Number(f[column])),
    ...MONEY.map((column) => moneyText(f[column])),
    f.version,
    batchId,
  )
}

/**
 * Batch rows as `read` selects them, each with its shards added, read in one transaction: the
 * dispatch thread writes on a connection of its own, and a row and its shards read in two
 * snapshots could straddle a fold and count a batch's lines twice or not at all.
 */
export function readCurrent(db: Database, read: () => Row[]): Row[] {
  return db.transaction(() => read().map((row) => current(db, row)!))()
}
