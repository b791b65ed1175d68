/**
 * Leases on the embedded store: renewed by their owner, given back untouched by an owner that
 * stops, and reaped back to pending once they ran out (their ceilings no longer reserved, their
 * owner's calls in flight counted as ended), or at once when the gateway that locks the data dir
 * starts: a crashed run's.
 */
import { Money } from '../../money/decimal.ts'
import { sqliteQuery as q, type SqliteConnection as Database } from '../connection.ts'
import { RETURNED_SHARD } from './progress-shards.ts'
import { addProgress } from './sqlite-batch-progress.ts'
import { CHUNK_LINE_OWNER_PREFIX, type LineKey } from './dispatch-store.ts'
import { capRoomBack } from './sqlite-spend-cap.ts'

const immediate = <T>(db: Database, fn: () => T): T => db.transaction(fn).immediate()

export async function renewLeases(db: Database, owner: string, leaseUntilMs: number) {
  return q(db, `UPDATE lines SET lease_until = ? WHERE lease_owner = ? AND status = 'running'`).run(
    leaseUntilMs,
    owner,
  ).changes
}

export async function releaseLeases(db: Database, owner: string, unsent: readonly LineKey[] = []) {
  return immediate(db, () => {
    // Still this owner's and never sent: the claim's attempt was not used (as a retry unsent).
    const unused = q(
      db,
      `UPDATE lines SET attempts = attempts - 1 WHERE batch_id = ? AND line_no = ?
         AND status = 'running' AND lease_owner = ? AND attempts > 0`,
    )
    for (const line of unsent) unused.run(line.batchId, line.lineNo, owner)
    return returnToPending(db, 'lease_owner = ?', [owner])
  })
}

export async function reapExpiredLeases(db: Database, nowMs: number) {
  return immediate(db, () => returnToPending(db, 'lease_until < ?', [nowMs]))
}

/**
 * At the start of the gateway that holds the data dir's lock (data-dir-lock.ts), before its first
 * claim: every line lease on the store is then a dead run's (each run owns its lines under an id
 * of its own, never used again), so its lines go back to pending at once, as the reaper would
 * take them once the lease ran out, not after it. A chunk's lines stay leased: they are in a
 * provider batch, which the batch lanes take over and follow.
 */
export function releaseDeadRunLeases(db: Database): number {
  return immediate(db, () =>
    returnToPending(db, 'substr(lease_owner, 1, ?) <> ?', [
      CHUNK_LINE_OWNER_PREFIX.length,
      CHUNK_LINE_OWNER_PREFIX,
    ]),
  )
}

function returnToPending(db: Database, where: string, params: unknown[]): number {
  // Through the small index of running lines: a plain GROUP BY here walked every line of every
  // batch (27 ms per call at 50,000 lines), on each maintenance tick.
  const rows = q(
    db,
    `SELECT batch_id, line_no, lease_owner FROM lines INDEXED BY lines_running WHERE status = 'running' AND ${where}`,
  ).all(...params)
  const reset = q(
    db,
    `UPDATE lines SET status = 'pending', lease_owner = NULL, lease_until = NULL
     WHERE batch_id = ? AND line_no = ? AND status = 'running' RETURNING ceiling_usd`,
  )
  const perBatch = new Map<string, { n: number; ceilings: Money | null }>()
  for (const row of rows) {
    const line = reset.get(row.batch_id, row.line_no)
    if (!line) continue
    const entry = perBatch.get(row.batch_id) ?? { n: 0, ceilings: null }
    entry.n++
    if (line.ceiling_usd !== null)
      entry.ceilings = (entry.ceilings ?? new Money(0)).plus(line.ceiling_usd)
    perBatch.set(row.batch_id, entry)
  }
  for (const [batchId, { n, ceilings }] of perBatch) {
    addProgress(db, batchId, RETURNED_SHARD, {
      pending: n,
      running: -n,
      reserved_usd: ceilings === null ? '0' : ceilings.negated(),
    })
    if (ceilings !== null && ceilings.isPositive()) capRoomBack(db, batchId)
  }
  // Their owner died or stopped: it has no call in flight for these batches any more.
  const idle = q(db, 'UPDATE batch_providers SET running = 0 WHERE batch_id = ? AND owner = ?')
  const pairs = new Set(rows.map((row) => `${row.batch_id}\u0000${row.lease_owner}`))
  for (const pair of pairs) idle.run(...(pair.split('\u0000') as [string, string]))
  return rows.length
}
