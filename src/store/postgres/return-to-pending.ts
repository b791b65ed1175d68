/**
 * Gives running lines back to pending, untouched (a released or expired lease), and moves their
 * batches' counters with them, a capped batch's reserved ceilings too. Batches are locked first, in id order; recording results locks
 * its lines before their batches (record-outcomes.ts says why, and what that costs).
 */
import type postgres from 'postgres'

export async function returnToPending(tx: postgres.TransactionSql, where: postgres.Fragment) {
  const batches = await tx`
    SELECT DISTINCT batch_id, lease_owner FROM lines WHERE status = 'running' AND ${where}`
  if (batches.length === 0) return 0
  const ids = [...new Set(batches.map((row) => row.batch_id as string))].sort()
  await tx`SELECT id FROM batches WHERE id = ANY(${ids}::text[]) ORDER BY id FOR UPDATE`
  const moved = await tx`
    WITH leased AS (
      SELECT batch_id, line_no FROM lines
      WHERE batch_id = ANY(${ids}::text[]) AND status = 'running' AND ${where}
      ORDER BY batch_id, line_no FOR UPDATE),
    moved AS (
      UPDATE lines l SET status = 'pending', lease_owner = NULL, lease_until = NULL
      FROM leased WHERE l.batch_id = leased.batch_id AND l.line_no = leased.line_no
      RETURNING l.batch_id, l.ceiling_usd),
    ${movedBackCounts(tx)}
    RETURNING counts.n`
  // Their owner died or stopped: it has no call in flight for these batches any more.
  await tx`
    UPDATE batch_providers p SET running = 0
    FROM unnest(${batches.map((row) => row.batch_id as string)}::text[],
                ${batches.map((row) => row.lease_owner as string)}::text[]) AS t (batch_id, owner)
    WHERE p.batch_id = t.batch_id AND p.owner = t.owner AND p.running <> 0`
  return moved.reduce((total, row) => total + Number(row.n), 0)
}

/**
 * The end of a statement that defined `moved` (batch_id, ceiling_usd of the lines it gave back
 * to pending): each batch's counters move with its lines, its reserved ceilings too, as one CTE
 * `counts` (batch_id, n, reserved) and the batches' UPDATE. Retries (record-outcomes.ts) end so.
 */
export const movedBackCounts = (tx: postgres.TransactionSql) => tx`
    counts AS (
      SELECT batch_id, count(*)::int AS n, sum(ceiling_usd) AS reserved
      FROM moved GROUP BY batch_id)
    UPDATE batches b SET running = b.running - counts.n, pending = b.pending + counts.n,
      reserved_usd = GREATEST(0, b.reserved_usd - coalesce(counts.reserved, 0)),
      ${capRoomBack(tx, tx`coalesce(counts.reserved, 0)`)}
    FROM counts WHERE b.id = counts.batch_id`

/**
 * Assignments for a batch row whose reserved ceilings went down by `reserved` (a column or
 * expression of the statement): room came back under its cap, so a `max_cost_reached` wait
 * ends and the batch is runnable again; the next claim decides whether the cap still holds.
 */
export const capRoomBack = (tx: postgres.TransactionSql, reserved: postgres.Fragment) => tx`
  waiting_code = CASE WHEN b.waiting_code = 'max_cost_reached' AND ${reserved} > 0 THEN NULL
    ELSE b.waiting_code END,
  waiting_message = CASE WHEN b.waiting_code = 'max_cost_reached' AND ${reserved} > 0 THEN NULL
    ELSE b.waiting_message END`
