/**
 * The batch life cycle after admission on the embedded store: pending lines past the deadline
 * end expired, pending lines of a cancelling batch end cancelled, a capped batch ends the lines
 * that can no longer fit, a running batch of an account short of its holds says so
 * (sqlite-credit-short.ts), a batch with nothing left to run spends one tick in `finalizing`, then
 * takes its terminal status (sqlite-finish-batch.ts). One IMMEDIATE transaction a pass.
 */
import { sqliteQuery as q, type SqliteConnection as Database } from '../connection.ts'
import type { AdvancedBatches } from './dispatch-store.ts'
import { currentCount } from './sqlite-batch-progress.ts'
import { finishBatch } from './sqlite-finish-batch.ts'
import { noteCreditWaits } from './sqlite-credit-short.ts'
import { endOverCap } from './sqlite-spend-cap.ts'

const PENDING = currentCount('pending')
const RUNNING = currentCount('running')

const immediate = <T>(db: Database, fn: () => T): T => db.transaction(fn).immediate()

/** Ends a batch's pending lines `expired` or `cancelled`, its counters moved with them; returns how many. */
function endPending(db: Database, id: string, now: number, status: 'expired' | 'cancelled') {
  const n = q(
    db,
    `UPDATE lines SET status = '${status}', error_code = 'batch_${status}', finished_at = ?
     WHERE batch_id = ? AND status = 'pending'`,
  ).run(now, id).changes
  q(db, `UPDATE batches SET pending = pending - ?, ${status} = ${status} + ? WHERE id = ?`).run(
    n,
    n,
    id,
  )
  return n
}

export async function advanceBatches(db: Database, now: number): Promise<AdvancedBatches> {
  return immediate(db, () => {
    const changed: string[] = []
    const ended = { cancelled: 0, expired: 0 }
    // Past the deadline: lines not yet run end `expired`; running ones may still finish.
    const overdue = q(
      db,
      `SELECT id FROM batches b WHERE status IN ('in_progress', 'cancelling') AND deadline_at <= ?
         AND ${PENDING} > 0`,
    ).all(now)
    for (const { id } of overdue) ended.expired += endPending(db, id, now, 'expired')
    // Lines handed back to a cancelling batch (a retry, an expired lease) end cancelled too.
    const cancelling = q(
      db,
      `SELECT id FROM batches b WHERE status = 'cancelling' AND ${PENDING} > 0`,
    ).all()
    for (const { id } of cancelling) ended.cancelled += endPending(db, id, now, 'cancelled')
    // A capped batch with nothing in flight ends the lines that can no longer fit (docs/money-and-limits.md).
    ended.cancelled += endOverCap(db, now)
    // A running batch of an account short of its holds says so until a deposit covers them.
    const waited = noteCreditWaits(db)
    // A batch is `finalizing` for one tick between its last line and its terminal status.
    for (const { id } of q(db, `SELECT id FROM batches WHERE status = 'finalizing'`).all()) {
      if (finishBatch(db, id, now)) changed.push(id)
    }
    const idle = q(
      db,
      `SELECT id, status FROM batches b WHERE status IN ('in_progress', 'cancelling')
         AND ${PENDING} = 0 AND ${RUNNING} = 0`,
    ).all()
    for (const { id, status } of idle) {
      if (status === 'cancelling') {
        if (finishBatch(db, id, now)) changed.push(id)
      } else {
        q(db, `UPDATE batches SET status = 'finalizing', finalizing_at = ? WHERE id = ?`).run(
          now,
          id,
        )
        changed.push(id)
      }
    }
    return { changed, ended, ...(waited.length > 0 && { waited }) }
  })
}
