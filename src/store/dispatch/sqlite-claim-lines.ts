/**
 * Claiming on the embedded store: the batches with lines ready to claim, and a claim of one
 * batch's pending lines under a lease, in line order (a capped batch's within its cap:
 * sqlite-spend-cap.ts). One process writes the file, so a claim is an UPDATE … RETURNING inside
 * an IMMEDIATE transaction.
 */
import { sqliteQuery as q, type SqliteConnection as Database } from '../connection.ts'
import type { ClaimedLine, LineClaim, NextLine, RunnableBatch } from './dispatch-store.ts'
import { shortOfHolds } from './credit-waiting.ts'
import { rowToClaimedLine, rowToRunnable } from './dispatch-rows.ts'
import { current, currentCount } from './sqlite-batch-progress.ts'
import { claimCapped, noteClaimed } from './sqlite-spend-cap.ts'
import { laneCondition } from './sqlite-lane-filter.ts'

type Row = Record<string, any>

const PENDING = currentCount('pending')
const RUNNING = currentCount('running')

const immediate = <T>(db: Database, fn: () => T): T => db.transaction(fn).immediate()

export async function runnableBatches(
  db: Database,
  nowMs: number,
  limit: number,
): Promise<RunnableBatch[]> {
  // Accounts whose balance no longer covers their holds are left out in SQL too, or enough of
  // their batches could fill the LIMIT and starve everyone else. Money is decimal TEXT here, so
  // SQL compares it as REAL with a margin far above REAL's rounding (it never leaves out an
  // account that is covered) and coversHolds decides exactly.
  const rows = q(
    db,
    `SELECT b.id, b.account_id, b.created_at, b.deadline_at, b.endpoint, b.lane_lines,
       ${PENDING} AS pending, ${RUNNING} AS running, a.balance_usd, a.held_usd
     FROM batches b JOIN accounts a ON a.id = b.account_id
     WHERE b.status = 'in_progress' AND ${PENDING} > 0 AND b.deadline_at > ?
       AND (b.waiting_code IS NULL OR b.waiting_code <> 'max_cost_reached')
       AND CAST(a.balance_usd AS REAL) >= CAST(a.held_usd AS REAL) * (1 - 1e-9) - 1e-9
     ORDER BY b.deadline_at, b.id LIMIT ?`,
  ).all(Math.floor(nowMs / 1000), limit)
  return rows.filter(coversHolds).map(rowToRunnable)
}

export async function queuedLines(db: Database, nowMs: number): Promise<number> {
  const row = q(
    db,
    `SELECT coalesce(sum(${PENDING}), 0) AS n FROM batches b
     WHERE b.status = 'in_progress' AND b.deadline_at > ?
       AND (b.waiting_code IS NULL OR b.waiting_code <> 'max_cost_reached')`,
  ).get(Math.floor(nowMs / 1000))
  return Number(row!.n)
}

export async function claimLines(db: Database, claim: LineClaim): Promise<ClaimedLine[]> {
  const { batchId, owner, limit, nowMs, leaseUntilMs, lanes } = claim
  return immediate(db, () => {
    const batch = current(
      db,
      q(
        db,
        `SELECT b.id, b.account_id, b.deadline_at, b.started_at, b.max_cost_usd, b.cost_usd,
           b.reserved_usd, a.balance_usd, a.held_usd AS account_held_usd
         FROM batches b JOIN accounts a ON a.id = b.account_id
         WHERE b.id = ? AND b.status = 'in_progress'`,
      ).get(batchId),
    )
    if (
      !batch ||
      !coversHolds({ balance_usd: batch.balance_usd, held_usd: batch.account_held_usd })
    )
      return []
    if (batch.max_cost_usd !== null)
      return claimCapped(db, batch, { batchId, owner, limit, nowMs, leaseUntilMs, lanes })
    const lane = laneCondition(lanes)
    const rows = q(
      db,
      `UPDATE lines SET status = 'running', lease_owner = ?, lease_until = ?, attempts = attempts + 1
       WHERE batch_id = ? AND line_no IN (
         SELECT line_no FROM lines WHERE batch_id = ? AND status = 'pending' AND not_before <= ?
           ${lane.sql} ORDER BY line_no LIMIT ?)
       RETURNING line_no, custom_id, input, attempts, batch_lane`,
    ).all(owner, leaseUntilMs, batchId, batchId, nowMs, ...lane.params, limit)
    if (rows.length === 0) return []
    noteClaimed(db, batch, owner, { n: rows.length, nowMs })
    rows.sort((a, b) => a.line_no - b.line_no)
    return rows.map((row) => rowToClaimedLine(batchId, row, batch))
  })
}

export async function nextLine(
  db: Database,
  batchId: string,
  nowMs: number,
  lanes?: readonly string[],
): Promise<NextLine | null> {
  const due = `SELECT line_no, input, batch_lane FROM lines
    WHERE batch_id = ?1 AND status = 'pending' AND not_before <= ?2`
  // Of several lanes: each one's first line along the index of pending lane lines, the earliest.
  const row = lanes
    ? q(
        db,
        `${due} AND line_no = (SELECT min((
           SELECT line_no FROM lines WHERE batch_id = ?1 AND status = 'pending' AND not_before <= ?2
             AND batch_lane IS NOT NULL AND batch_lane = k.value ORDER BY line_no LIMIT 1))
         FROM json_each(?3) k)`,
      ).get(batchId, nowMs, JSON.stringify(lanes))
    : q(db, `${due} ORDER BY line_no LIMIT 1`).get(batchId, nowMs)
  return row
    ? { lineNo: row.line_no, input: row.input as string, batchLane: row.batch_lane ?? null }
    : null
}

export async function laneLinesPending(
  db: Database,
  batchId: string,
  lanes: readonly string[],
): Promise<number> {
  const row = q(
    db,
    `SELECT count(*) AS n FROM lines WHERE batch_id = ? AND status = 'pending'
       AND batch_lane IS NOT NULL AND batch_lane IN (SELECT value FROM json_each(?))`,
  ).get(batchId, JSON.stringify(lanes))
  return row!.n as number
}

export async function leaveLane(
  db: Database,
  batchId: string,
  lineNos: readonly number[],
): Promise<void> {
  if (lineNos.length === 0) return
  q(
    db,
    `UPDATE lines SET batch_lane = NULL WHERE batch_id = ?
       AND line_no IN (SELECT value FROM json_each(?))`,
  ).run(batchId, JSON.stringify(lineNos))
}

/**
 * Whether an account's balance still covers what it holds. Only a line that cost more than its
 * ceiling (or credit taken away by an operator) can make it fall short; until a deposit makes it
 * cover them again, none of the account's lines is dispatched, so no further line runs on credit
 * that is not there (its batches say insufficient_credit, sqlite-credit-short.ts; the lines wait,
 * and expire unbilled at their deadline).
 */
function coversHolds(row: Row): boolean {
  return !shortOfHolds(row.balance_usd, row.held_usd)
}
