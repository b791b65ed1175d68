/**
 * The dispatch role on PostgreSQL, composed from one file per query family: claims
 * (postgres-claim-lines.ts), outcomes (postgres-record-outcomes.ts), leases (postgres-leases.ts),
 * the batch life cycle (postgres-advance-batches.ts), waiting (postgres-waiting.ts) and ETAs
 * (postgres-etas.ts). Runs on any connection pool to the database; in the gateway on a thread of
 * its own (dispatch-thread.ts), so the driver's work for thousands of lines a second (rows parsed,
 * outcomes serialized) does not hold up the event loop that reads upstream answers.
 */
import type postgres from 'postgres'
import type { BatchStatus } from '../../domain.ts'
import type { DispatchStore } from './dispatch-store.ts'
import { advanceBatches } from './postgres-advance-batches.ts'
import {
  createPostgresClaims,
  laneLinesPending,
  leaveLane,
  nextLine,
  queuedLines,
  runnableBatches,
} from './postgres-claim-lines.ts'
import { recordEtas } from './postgres-etas.ts'
import { reapExpiredLeases, releaseLeases, renewLeases } from './postgres-leases.ts'
import { LEDGER_SHORT, recordOutcomes } from './postgres-record-outcomes.ts'
import { setWaiting } from './postgres-waiting.ts'

// "now" rounds down, so nothing happens sooner than asked.
const earlier = Math.floor

/** The dispatch store on PostgreSQL. */
export function createPostgresDispatch(sql: postgres.Sql): DispatchStore {
  return {
    runnableBatches: (nowMs, limit) => runnableBatches(sql, nowMs, limit),
    queuedLines: (nowMs) => queuedLines(sql, nowMs),
    claimLines: createPostgresClaims(sql),
    nextLine: (batchId, nowMs, lanes) => nextLine(sql, batchId, nowMs, lanes),
    leaveLane: (batchId, lineNos) => leaveLane(sql, batchId, lineNos),
    laneLinesPending: (batchId, lanes) => laneLinesPending(sql, batchId, lanes),
    batchStatuses: (ids) => batchStatuses(sql, ids),
    renewLeases: (owner, leaseUntilMs) => renewLeases(sql, owner, leaseUntilMs),
    async recordOutcomes(owner, outcomes, nowMs, calls = []) {
      if (outcomes.length === 0 && calls.length === 0) return { recorded: 0, charged: [] }
      const record = { owner, outcomes, nowMs, calls }
      try {
        return await sql.begin((tx) => recordOutcomes(tx, record))
      } catch (error) {
        // A charge the shared lock cannot settle exactly (postgres-record-outcomes.ts): again,
        // with the accounts locked FOR UPDATE. Nothing of the first try was kept.
        if (!String((error as Error)?.message).includes(LEDGER_SHORT)) throw error
        return sql.begin((tx) => recordOutcomes(tx, record, true))
      }
    },
    releaseLeases: (owner, unsent) => releaseLeases(sql, owner, unsent),
    reapExpiredLeases: (nowMs) => reapExpiredLeases(sql, nowMs),
    advanceBatches: (now) => sql.begin((tx) => advanceBatches(tx, earlier(now))),
    setWaiting: (batchId, waiting, replaces) => setWaiting(sql, { batchId, waiting, replaces }),
    recordEtas: (etas) => recordEtas(sql, etas),
  }
}

async function batchStatuses(sql: postgres.Sql, ids: readonly string[]) {
  const statuses: Record<string, BatchStatus> = {}
  if (ids.length === 0) return statuses
  const rows = await sql`SELECT id, status FROM batches WHERE id = ANY(${[...ids]}::text[])`
  for (const row of rows) statuses[row.id] = row.status
  return statuses
}
