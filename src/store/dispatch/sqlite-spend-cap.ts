/**
 * The embedded store's side of spend caps (docs/money-and-limits.md): claiming a capped batch's lines only while
 * they fit its cap with the ceilings in flight, ending the lines that never can, and the batch's
 * `max_cost_reached` wait. Runs inside the dispatch store's transactions (sqlite-dispatch.ts).
 */
import type { SqliteConnection as Database } from '../connection.ts'
import type { BatchWaiting } from '../../domain.ts'
import { Money, moneyText } from '../../money/decimal.ts'
import { capEndedWaiting, capWaiting } from './cap-waiting.ts'
import { claimShard } from './progress-shards.ts'
import { rowToClaimedLine } from './dispatch-rows.ts'
import { addProgress, current, currentCount } from './sqlite-batch-progress.ts'
import type { ClaimedLine, LaneFilter } from './dispatch-store.ts'
import { laneCondition } from './sqlite-lane-filter.ts'

type Row = Record<string, any>

const q = (db: Database, sql: string) => db.query<Row, any[]>(sql)

/**
 * Room came back under a batch's cap (a reserved ceiling ended): its lines may fit again, so it
 * is runnable again and the next claim decides whether the cap still holds them back. Meanwhile a
 * batch waiting `max_cost_reached` is left out of runnableBatches, so its lines are not looked
 * over on every turn while nothing can change. Only a waiting row is written.
 */
export function capRoomBack(db: Database, batchId: string) {
  q(
    db,
    `UPDATE batches SET waiting_code = NULL, waiting_message = NULL
     WHERE id = ? AND waiting_code = 'max_cost_reached'`,
  ).run(batchId)
}

/**
 * `n` lines of the batch (a row with its shards: `current`) were claimed, reserving `reserved`:
 * counted in the claiming instance's shard, and the batch started if it was not yet.
 */
export function noteClaimed(
  db: Database,
  batch: Row,
  owner: string,
  claimed: { n: number; nowMs: number; reserved?: Money },
) {
  addProgress(db, batch.id, claimShard(owner), {
    pending: -claimed.n,
    running: claimed.n,
    reserved_usd: claimed.reserved ?? '0',
  })
  if (batch.started_at === null)
    q(db, 'UPDATE batches SET started_at = ? WHERE id = ? AND started_at IS NULL').run(
      Math.floor(claimed.nowMs / 1000),
      batch.id,
    )
}

/** What a claim asks for: DispatchStore.claimLines' arguments. */
export interface CappedClaim {
  batchId: string
  owner: string
  limit: number
  nowMs: number
  leaseUntilMs: number
  lanes?: LaneFilter
}

/** claimLines for a batch with a spend cap (see DispatchStore.claimLines); inside its transaction. */
export function claimCapped(db: Database, batch: Row, asked: CappedClaim): ClaimedLine[] {
  const { batchId, owner, limit, nowMs, leaseUntilMs } = asked
  const lane = laneCondition(asked.lanes)
  let room = new Money(batch.max_cost_usd).minus(batch.cost_usd).minus(batch.reserved_usd)
  // Ceilings are decimal TEXT: SQL narrows the candidates as REAL with a margin, and the
  // exact comparison below decides.
  // No room left still takes a free line (a ceiling of 0), as the PostgreSQL claim does.
  const candidates = !room.isNegative()
    ? q(
        db,
        `SELECT line_no, ceiling_usd FROM lines
           WHERE batch_id = ? AND status = 'pending' AND not_before <= ? ${lane.sql}
             AND CAST(ceiling_usd AS REAL) <= ? ORDER BY line_no LIMIT ?`,
      ).all(batchId, nowMs, ...lane.params, room.toNumber() * (1 + 1e-9) + 1e-12, limit)
    : []
  const chosen: Row[] = []
  let reserved = new Money(0)
  for (const candidate of candidates) {
    const ceiling = new Money(candidate.ceiling_usd)
    if (ceiling.greaterThan(room.plus(reserved))) continue // fits on its own only as REAL
    if (ceiling.greaterThan(room)) break // the next would not fit
    chosen.push(candidate)
    room = room.minus(ceiling)
    reserved = reserved.plus(ceiling)
  }
  const claim = q(
    db,
    `UPDATE lines SET status = 'running', lease_owner = ?, lease_until = ?, attempts = attempts + 1
       WHERE batch_id = ? AND line_no = ? AND status = 'pending'
       RETURNING line_no, custom_id, input, attempts, ceiling_usd, batch_lane`,
  )
  const rows = chosen.map((row) => claim.get(owner, leaseUntilMs, batchId, row.line_no)!)
  if (rows.length > 0) noteClaimed(db, batch, owner, { n: rows.length, nowMs, reserved })
  // Short of lines: is a due line left that no longer fits? Then the cap is what holds it.
  const dearest =
    rows.length < limit
      ? q(
          db,
          `SELECT ceiling_usd FROM lines WHERE batch_id = ? AND status = 'pending' AND not_before <= ?
             ${lane.sql} ORDER BY CAST(ceiling_usd AS REAL) DESC LIMIT 1`,
        ).get(batchId, nowMs, ...lane.params)
      : null
  // Nothing taken, but a line that fits waits out a retry's backoff: that, not the cap, is what
  // holds the batch (the next claim after its not_before takes it).
  const blocked =
    dearest !== null &&
    room.lessThan(dearest.ceiling_usd) &&
    !(rows.length === 0 && pendingLineFits(db, batchId, room))
  if (blocked) setCapWaiting(db, batchId, capWaiting(moneyText(batch.max_cost_usd)))
  else if (rows.length > 0) setCapWaiting(db, batchId, null)
  return rows.map((row) => rowToClaimedLine(batchId, row, batch))
}

/** Sets or clears the cap's own waiting code, leaving any other part's. */
function setCapWaiting(db: Database, batchId: string, waiting: BatchWaiting | null) {
  q(
    db,
    `UPDATE batches SET waiting_code = ?, waiting_message = ?, waiting_until = NULL
       WHERE id = ? AND (waiting_code IS NULL OR waiting_code = 'max_cost_reached')
         AND (waiting_code IS NOT ? OR waiting_message IS NOT ?)`,
  ).run(
    waiting?.code ?? null,
    waiting?.message ?? null,
    batchId,
    waiting?.code ?? null,
    waiting?.message ?? null,
  )
}

/**
 * With nothing of a capped batch in flight and none of its pending lines fitting what is left of
 * its cap, none ever will: they end cancelled `max_cost_reached`, and the batch says so. While a
 * pending line still fits (before the first claim, or one waiting out a retry's backoff), the
 * batch is left runnable for the claim to take it, and the lines that do not fit wait for the end.
 * Inside advanceBatches' transaction; returns how many lines it ended.
 */
export function endOverCap(db: Database, now: number): number {
  const capped = q(
    db,
    `SELECT * FROM batches b
     WHERE status = 'in_progress' AND max_cost_usd IS NOT NULL
       AND ${currentCount('running')} = 0 AND ${currentCount('pending')} > 0`,
  )
    .all()
    .map((row) => current(db, row)!)
  let ended = 0
  for (const batch of capped) {
    const room = new Money(batch.max_cost_usd).minus(batch.cost_usd).minus(batch.reserved_usd)
    if (pendingLineFits(db, batch.id, room)) {
      capRoomBack(db, batch.id)
      continue
    }
    // Ceilings are decimal TEXT: narrowed as REAL with a margin, decided exactly.
    const over = q(
      db,
      `SELECT line_no, ceiling_usd FROM lines WHERE batch_id = ? AND status = 'pending'
         AND CAST(ceiling_usd AS REAL) >= ?`,
    )
      .all(batch.id, room.toNumber() * (1 - 1e-9) - 1e-12)
      .filter((line) => room.lessThan(line.ceiling_usd))
    if (over.length === 0) continue
    const end = q(
      db,
      `UPDATE lines SET status = 'cancelled', error_code = 'max_cost_reached', finished_at = ?
       WHERE batch_id = ? AND line_no = ? AND status = 'pending'`,
    )
    let n = 0
    for (const line of over) n += end.run(now, batch.id, line.line_no).changes
    const previous = q(db, 'SELECT cancelled FROM batches WHERE id = ?').get(batch.id)!
    const waiting = capEndedWaiting(batch.id, batch.max_cost_usd, previous.cancelled + n)
    q(
      db,
      `UPDATE batches SET pending = pending - ?, cancelled = cancelled + ?,
         waiting_code = ?, waiting_message = ?, waiting_until = NULL WHERE id = ?`,
    ).run(n, n, waiting.code, waiting.message, batch.id)
    ended += n
  }
  return ended
}

/**
 * Whether a pending line of the batch fits `room` (narrowed as REAL with a margin, decided
 * exactly), as claimCapped decides it: with no room left, only a free line (a ceiling of 0).
 */
function pendingLineFits(db: Database, batchId: string, room: Money): boolean {
  if (room.isNegative()) return false
  const cheapest = q(
    db,
    `SELECT ceiling_usd FROM lines WHERE batch_id = ? AND status = 'pending'
       AND CAST(ceiling_usd AS REAL) <= ? ORDER BY CAST(ceiling_usd AS REAL) LIMIT 1`,
  ).get(batchId, room.toNumber() * (1 + 1e-9) + 1e-12)
  return cheapest !== null && !room.lessThan(cheapest.ceiling_usd)
}
