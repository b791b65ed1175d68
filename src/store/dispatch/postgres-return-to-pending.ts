/**
 * Gives running lines back to pending, untouched (a released or expired lease), and moves their
 * batches' counters with them, a capped batch's reserved ceilings too (postgres-batch-progress.ts).
 * Batches are locked first, in id order; recording results locks its lines before their capped
 * batches (record-outcomes.ts says why, and what that costs).
 */
import type postgres from 'postgres'
import { addProgress, movedDeltas, RETURNED_SHARD } from './postgres-batch-progress.ts'

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
      RETURNING l.batch_id, l.ceiling_usd)
    ${movedBackCounts(tx, RETURNED_SHARD)}`
  // Their owner died or stopped: it has no call in flight for these batches any more.
  await tx`
    UPDATE batch_providers p SET running = 0
    FROM unnest(${batches.map((row) => row.batch_id as string)}::text[],
                ${batches.map((row) => row.lease_owner as string)}::text[]) AS t (batch_id, owner)
    WHERE p.batch_id = t.batch_id AND p.owner = t.owner AND p.running <> 0`
  return moved.reduce((total, row) => total + Number(row.n), 0)
}

/**
 * The end of a statement whose CTE `moved` (batch_id, ceiling_usd) gave lines back to pending:
 * the batches' counters move with them in `shard`, their reserved ceilings too, and a capped
 * batch that waited for room is runnable again (capRoomBack); the statement answers how many
 * lines moved per batch, as `n`. Retries (record-outcomes.ts) end so.
 */
export const movedBackCounts = (tx: postgres.TransactionSql, shard: string) => tx`,
    counts AS (
      SELECT batch_id, count(*)::int AS n, coalesce(sum(ceiling_usd), 0) AS reserved
      FROM moved GROUP BY batch_id),
    progress AS (
      ${addProgress(tx, shard, movedDeltas(tx, tx`SELECT batch_id, -n AS n, -reserved AS reserved FROM counts`))}
      RETURNING 1),
    room_back AS (${capRoomBack(tx, tx`counts`)})
    SELECT n FROM counts`

/**
 * An UPDATE of the batches in `freed` (a relation of batch_id and `reserved`, the ceilings no
 * longer reserved): room came back under a cap, so a `max_cost_reached` wait ends and the batch
 * is runnable again; the next claim decides whether the cap still holds. Only waiting rows are
 * written.
 */
export const capRoomBack = (tx: postgres.TransactionSql, freed: postgres.Fragment) => tx`
  UPDATE batches b SET waiting_code = NULL, waiting_message = NULL
  FROM ${freed} f
  WHERE b.id = f.batch_id AND f.reserved > 0 AND b.waiting_code = 'max_cost_reached'
  RETURNING 1`
