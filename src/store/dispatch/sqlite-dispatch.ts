/**
 * The dispatch role on bun:sqlite, composed from one file per query family: claims
 * (sqlite-claim-lines.ts), outcomes (sqlite-record-outcomes.ts), leases (sqlite-leases.ts), the
 * batch life cycle (sqlite-advance-batches.ts), waiting (sqlite-waiting.ts) and ETAs
 * (sqlite-etas.ts). Works on any connection to the store's file; for a file on disk it runs on a
 * thread of its own (dispatch-thread.ts), so its SQLite work does not hold up the event loop that
 * reads upstream answers.
 */
import type { BatchStatus } from '../../domain.ts'
import { sqliteQuery as q, type SqliteConnection as Database } from '../connection.ts'
import type { DispatchStore } from './dispatch-store.ts'
import { advanceBatches } from './sqlite-advance-batches.ts'
import {
  claimLines,
  laneLinesPending,
  leaveLane,
  nextLine,
  queuedLines,
  runnableBatches,
} from './sqlite-claim-lines.ts'
import { recordEtas } from './sqlite-etas.ts'
import { reapExpiredLeases, releaseLeases, renewLeases } from './sqlite-leases.ts'
import { recordOutcomes } from './sqlite-record-outcomes.ts'
import { setWaiting } from './sqlite-waiting.ts'

/** The dispatch store on bun:sqlite. */
export function createSqliteDispatch(db: Database): DispatchStore {
  return {
    runnableBatches: (nowMs, limit) => runnableBatches(db, nowMs, limit),
    queuedLines: (nowMs) => queuedLines(db, nowMs),
    claimLines: (claim) => claimLines(db, claim),
    nextLine: (batchId, nowMs, lanes) => nextLine(db, batchId, nowMs, lanes),
    leaveLane: (batchId, lineNos) => leaveLane(db, batchId, lineNos),
    laneLinesPending: (batchId, lanes) => laneLinesPending(db, batchId, lanes),
    batchStatuses: (ids) => batchStatuses(db, ids),
    renewLeases: (owner, leaseUntilMs) => renewLeases(db, owner, leaseUntilMs),
    recordOutcomes: (owner, outcomes, nowMs, calls) =>
      recordOutcomes(db, { owner, outcomes, nowMs, calls }),
    releaseLeases: (owner, unsent) => releaseLeases(db, owner, unsent),
    reapExpiredLeases: (nowMs) => reapExpiredLeases(db, nowMs),
    advanceBatches: (now) => advanceBatches(db, now),
    setWaiting: (batchId, waiting, replaces) => setWaiting(db, { batchId, waiting, replaces }),
    recordEtas: (etas) => recordEtas(db, etas),
  }
}

export async function batchStatuses(db: Database, ids: readonly string[]) {
  const statuses: Record<string, BatchStatus> = {}
  if (ids.length === 0) return statuses
  const rows = q(
    db,
    `SELECT id, status FROM batches WHERE id IN (${ids.map(() => '?').join(', ')})`,
  ).all(...ids)
  for (const row of rows) statuses[row.id] = row.status
  return statuses
}
