/**
 * Claiming on PostgreSQL: the batches with lines ready to claim, and a claim of one batch's
 * pending lines under a lease, in line order, as one `UPDATE` of the lines a `SELECT … FOR
 * UPDATE SKIP LOCKED` picked (claimStatement); a capped batch's under its row's lock, within its
 * cap.
 */
import type postgres from 'postgres'
import { Money, moneyText } from '../../money/decimal.ts'
import { capWaiting } from './cap-waiting.ts'
import { rowToClaimedLine, rowToRunnable } from './dispatch-rows.ts'
import type {
  ClaimedLine,
  LaneFilter,
  LineClaim,
  NextLine,
  RunnableBatch,
} from './dispatch-store.ts'
import {
  addProgress,
  claimShard,
  current,
  movedDeltas,
  progressJoin,
} from './postgres-batch-progress.ts'

// Times are bigint columns, and callers' times may carry fractions (a jittered delay, a lease of
// 2.5 s): stored deadlines round up, "now" rounds down, so nothing happens sooner than asked.
const later = Math.ceil
const earlier = Math.floor

export async function runnableBatches(
  sql: postgres.Sql,
  nowMs: number,
  limit: number,
): Promise<RunnableBatch[]> {
  // An account whose balance no longer covers its holds (a line cost more than its ceiling, or
  // credit taken away) is not dispatched until a deposit covers them again, its batches saying
  // insufficient_credit meanwhile (postgres-credit-short.ts); the claim checks it again below. A
  // batch held back by its cap is left out until a reserved ceiling ends (capRoomBack).
  const rows = await sql`
    SELECT b.id, b.account_id, b.created_at, b.deadline_at, b.endpoint, b.lane_lines,
      ${current(sql, 'pending')} AS pending, ${current(sql, 'running')} AS running
    FROM batches b JOIN accounts a ON a.id = b.account_id ${progressJoin(sql)}
    WHERE b.status = 'in_progress' AND ${current(sql, 'pending')} > 0
      AND b.deadline_at > ${earlier(nowMs / 1000)}
      AND b.waiting_code IS DISTINCT FROM 'max_cost_reached'
      AND a.balance_usd >= a.held_usd
    ORDER BY b.deadline_at, b.id LIMIT ${limit}`
  return rows.map(rowToRunnable)
}

export async function queuedLines(sql: postgres.Sql, nowMs: number): Promise<number> {
  const [row] = await sql`
    SELECT coalesce(sum(${current(sql, 'pending')}), 0)::bigint AS n
    FROM batches b ${progressJoin(sql)}
    WHERE b.status = 'in_progress' AND b.deadline_at > ${earlier(nowMs / 1000)}
      AND b.waiting_code IS DISTINCT FROM 'max_cost_reached'`
  return Number(row!.n)
}

export async function nextLine(
  sql: postgres.Sql,
  batchId: string,
  nowMs: number,
  lanes?: readonly string[],
): Promise<NextLine | null> {
  const now = earlier(nowMs)
  // Of several lanes: each one's first line along the index of pending lane lines, the earliest.
  const [row] = lanes
    ? await sql`SELECT l.line_no, l.input, l.batch_lane
        FROM unnest(${lanes as string[]}::text[]) AS k(lane)
        CROSS JOIN LATERAL (SELECT line_no, input, batch_lane FROM lines
          WHERE batch_id = ${batchId} AND status = 'pending' AND not_before <= ${now}
            AND batch_lane IS NOT NULL AND batch_lane = k.lane
          ORDER BY line_no LIMIT 1) l
        ORDER BY l.line_no LIMIT 1`
    : await sql`SELECT line_no, input, batch_lane FROM lines
        WHERE batch_id = ${batchId} AND status = 'pending' AND not_before <= ${now}
        ORDER BY line_no LIMIT 1`
  return row
    ? {
        lineNo: row.line_no as number,
        input: row.input as string,
        batchLane: row.batch_lane ?? null,
      }
    : null
}

export async function laneLinesPending(
  sql: postgres.Sql,
  batchId: string,
  lanes: readonly string[],
): Promise<number> {
  const [row] = await sql`SELECT count(*)::int AS n FROM lines
    WHERE batch_id = ${batchId} AND status = 'pending'
      AND batch_lane IS NOT NULL AND batch_lane = ANY(${lanes as string[]}::text[])`
  return row!.n as number
}

export async function leaveLane(
  sql: postgres.Sql,
  batchId: string,
  lineNos: readonly number[],
): Promise<void> {
  if (lineNos.length === 0) return
  await sql`UPDATE lines SET batch_lane = NULL
    WHERE batch_id = ${batchId} AND line_no = ANY(${lineNos as number[]}::int[])`
}

/**
 * The condition on `lines` (after an AND) that keeps a claim or a look to these batch lanes
 * (LaneFilter). One lane's names `batch_lane IS NOT NULL`, so the partial index of pending lane
 * lines serves it.
 */
function laneCondition(db: postgres.Sql | postgres.TransactionSql, lanes: LaneFilter | undefined) {
  if (!lanes) return db``
  if ('only' in lanes) return db`AND batch_lane IS NOT NULL AND batch_lane = ${lanes.only}`
  return db`AND (batch_lane IS NULL OR batch_lane <> ALL(${lanes.except as string[]}::text[]))`
}

/**
 * The claim call (DispatchStore.claimLines) on `sql`, with the batches seen with a spend cap
 * remembered (it is set at admission and never changes).
 */
/** What the claims of one store have seen of batches: those with a cap, those started. */
interface SeenBatches {
  capped: Set<string>
  started: Set<string>
}

export function createPostgresClaims(sql: postgres.Sql) {
  const seen: SeenBatches = { capped: new Set(), started: new Set() }
  return (claim: LineClaim) => claimLines(sql, seen, claim)
}

/**
 * One claim under its batch's row lock, taken first as every batch change takes it. A capped
 * claim notes what its cap now holds back under the same lock: the maintenance pass that ends the
 * cap's lines (endOverCap) locks the row too, so its words about them are never overwritten by a
 * claim that read the lines before they ended.
 */
const underBatchLock = (sql: postgres.Sql, claim: Claim, capped: boolean) =>
  sql.begin(async (tx) => {
    await tx`SELECT 1 FROM batches WHERE id = ${claim.batchId} FOR UPDATE`
    const rows = await claimStatement(tx, claim, capped)
    if (capped && rows[0] && rows[0].max_cost_usd !== null)
      await noteCap(tx, { ...claim, batch: rows[0], claimed: claimedOf(claim.batchId, rows) })
    return rows
  })

const claimedOf = (batchId: string, rows: readonly Record<string, any>[]): ClaimedLine[] =>
  rows
    .filter((row) => row.line_no !== null)
    .map((row) => rowToClaimedLine(batchId, row, row))
    .sort((a, b) => a.lineNo - b.lineNo)

async function claimLines(
  sql: postgres.Sql,
  seen: SeenBatches,
  { batchId, owner, limit, nowMs, leaseUntilMs, lanes }: LineClaim,
): Promise<ClaimedLine[]> {
  const claim = { batchId, owner, limit, now: earlier(nowMs), until: later(leaseUntilMs), lanes }
  // A claim that starts a batch writes its row's started_at after locking lines: taken bare,
  // it would lock in the order lines → batch, against a cancel's batch → lines, and the two
  // deadlock. So until the batch is seen started, its claims take its row first.
  const started = seen.started.has(batchId)
  let rows = seen.capped.has(batchId)
    ? []
    : started
      ? await claimStatement(sql, claim, false)
      : await underBatchLock(sql, claim, false)
  // A capped batch's room is decided one claim at a time, under its row's lock (claimStatement).
  if (seen.capped.has(batchId) || (rows[0] && rows[0].max_cost_usd !== null)) {
    seen.capped.add(batchId)
    rows = await underBatchLock(sql, claim, true)
  }
  if (rows[0] && (rows[0].started_at !== null || rows.some((row) => row.line_no !== null)))
    seen.started.add(batchId)
  return claimedOf(batchId, rows)
}

/**
 * After a capped claim: waiting `max_cost_reached` when a due line is left that no longer fits,
 * cleared when lines were taken and none is held back (the cap's own code only).
 */
async function noteCap(
  sql: postgres.TransactionSql,
  {
    batchId,
    batch,
    claimed,
    limit,
    now,
    lanes,
  }: {
    batchId: string
    batch: Record<string, any>
    claimed: ClaimedLine[]
    limit: number
    now: number
    lanes?: LaneFilter
  },
) {
  const room = claimed.reduce(
    (left, line) => left.minus(line.ceilingUsd ?? 0),
    new Money(batch.room as string),
  )
  let blocked = false
  if (claimed.length < limit) {
    const [dearest] = await sql`
      SELECT 1 FROM lines WHERE batch_id = ${batchId} AND status = 'pending'
        AND not_before <= ${now} ${laneCondition(sql, lanes)}
        AND ceiling_usd > ${moneyText(room)}::numeric LIMIT 1`
    blocked = dearest !== undefined
    // Nothing taken, but a line that fits waits out a retry's backoff: that, not the cap, is
    // what holds the batch (the next claim after its not_before takes it).
    if (blocked && claimed.length === 0) {
      const [waitsForRetry] = await sql`
        SELECT 1 FROM lines WHERE batch_id = ${batchId} AND status = 'pending'
          AND not_before > ${now} ${laneCondition(sql, lanes)}
          AND ceiling_usd <= ${moneyText(room)}::numeric LIMIT 1`
      if (waitsForRetry) blocked = false
    }
  }
  if (!blocked && claimed.length === 0) return
  const waiting = blocked ? capWaiting(moneyText(batch.max_cost_usd)) : null
  await sql`
    UPDATE batches SET waiting_code = ${waiting?.code ?? null},
      waiting_message = ${waiting?.message ?? null}, waiting_until = NULL
    WHERE id = ${batchId} AND (waiting_code IS NULL OR waiting_code = 'max_cost_reached')
      AND (waiting_code IS DISTINCT FROM ${waiting?.code ?? null}::text
        OR waiting_message IS DISTINCT FROM ${waiting?.message ?? null}::text)`
}

interface Claim {
  batchId: string
  owner: string
  limit: number
  /** ms, rounded down; the lease runs to `until` (ms, rounded up). */
  now: number
  until: number
  lanes?: LaneFilter
}

/**
 * One statement, so one round trip, and no lock on the batch row: the lines are taken with
 * SKIP LOCKED, and what they moved goes to the instance's claim shard (postgres-batch-progress.ts). A
 * cancel or expiry that committed before is seen; one that commits meanwhile ends only the lines
 * it locks first, and the claimed ones run. The pick is a CTE, not an `IN (subquery)`: a subquery
 * with LIMIT and SKIP LOCKED may be re-run by the planner for each outer row and then lock and
 * return more than `limit`.
 *
 * A capped batch (max_cost_usd set; `capped`) is claimed by the caller's transaction after it
 * locked the batch row: settlements of capped batches lock it too, so the room read here, in a
 * snapshot taken after that lock, holds every committed claim and charge. Among the picked lines
 * whose ceiling fits in the room on its own it takes the line-order prefix whose ceilings fit
 * together. An uncapped batch is claimed only with `capped` false, and its lines have no ceiling.
 */
function claimStatement(db: postgres.Sql | postgres.TransactionSql, claim: Claim, capped: boolean) {
  const { batchId, now } = claim
  return db`
    WITH batch AS (
      SELECT b.account_id, b.deadline_at, b.max_cost_usd, b.started_at,
        b.max_cost_usd - ${current(db, 'cost_usd')} - ${current(db, 'reserved_usd')} AS room
      FROM batches b ${progressJoin(db)}
      WHERE b.id = ${batchId} AND b.status = 'in_progress'
        AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = b.account_id AND a.balance_usd >= a.held_usd)),
    picked AS (
      SELECT line_no, ceiling_usd FROM lines
      WHERE batch_id = ${batchId} AND status = 'pending' AND not_before <= ${now}
        ${laneCondition(db, claim.lanes)}
        AND EXISTS (SELECT 1 FROM batch WHERE (max_cost_usd IS NOT NULL) = ${capped})
        AND (ceiling_usd IS NULL OR ceiling_usd <= (SELECT room FROM batch))
      ORDER BY line_no LIMIT ${claim.limit}
      FOR UPDATE SKIP LOCKED),
    fitting AS (
      SELECT line_no FROM (
        SELECT line_no, sum(ceiling_usd) OVER (ORDER BY line_no) AS together FROM picked) p
      WHERE together IS NULL OR together <= (SELECT room FROM batch)),
    claimed AS (
      UPDATE lines l SET status = 'running', lease_owner = ${claim.owner},
        lease_until = ${claim.until}, attempts = l.attempts + 1
      FROM fitting WHERE l.batch_id = ${batchId} AND l.line_no = fitting.line_no
      RETURNING l.line_no, l.custom_id, l.input, l.attempts, l.ceiling_usd, l.batch_lane),
    counted AS (
      ${addProgress(
        db,
        claimShard(claim.owner),
        movedDeltas(
          db,
          db`SELECT ${batchId}::text AS batch_id, count(*)::int AS n,
               coalesce(sum(ceiling_usd), 0) AS reserved
             FROM claimed HAVING count(*) > 0`,
        ),
      )}),
    started AS (
      UPDATE batches SET started_at = ${earlier(now / 1000)}
      WHERE id = ${batchId} AND started_at IS NULL AND EXISTS (SELECT 1 FROM claimed))
    SELECT claimed.*, batch.account_id, batch.deadline_at, batch.max_cost_usd, batch.room,
      batch.started_at
    FROM batch LEFT JOIN claimed ON true`
}
