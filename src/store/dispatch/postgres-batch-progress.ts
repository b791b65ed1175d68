/**
 * A batch's progress off its row (docs/scale.md, sql/0017_batch_progress.sql): claims, settlements
 * and lines handed back write what they moved into `batch_progress`, a row per batch and shard (an
 * instance's claims, its settlements, the lease reaper), in the transaction that moves the lines.
 * Instances therefore never queue on the batch's row, which changes only with its status. Reads
 * add the shards to the row; when the batch ends they are folded into it and deleted.
 */
import type postgres from 'postgres'

type Db = postgres.ISql

export { claimShard, RETURNED_SHARD } from './progress-shards.ts'

/**
 * A LEFT JOIN LATERAL of the shards' sums of batch `b`, as `p_*` columns (null when it has none):
 * `SELECT b.*, p.* FROM batches b ${progressJoin(sql)}`, then rowToBatch adds them to the row's.
 */
export const progressJoin = (db: Db) => db`
  LEFT JOIN LATERAL (
    SELECT sum(pending) AS p_pending, sum(running) AS p_running, sum(succeeded) AS p_succeeded,
      sum(failed) AS p_failed, sum(cost_usd) AS p_cost_usd, sum(held_usd) AS p_held_usd,
      sum(reserved_usd) AS p_reserved_usd, sum(usage_input_tokens) AS p_usage_input_tokens,
      sum(usage_cached_input_tokens) AS p_usage_cached_input_tokens,
      sum(usage_cache_write_tokens) AS p_usage_cache_write_tokens,
      sum(usage_output_tokens) AS p_usage_output_tokens,
      sum(usage_uncached_cost_usd) AS p_usage_uncached_cost_usd, sum(changes) AS p_changes
    FROM batch_progress WHERE batch_id = b.id) p ON true`

/** Batch `b`'s current value of a counter column, in SQL, with the join above. */
export const current = (db: Db, column: 'pending' | 'running' | 'cost_usd' | 'reserved_usd') =>
  db`(b.${db(column)} + coalesce(p.${db(`p_${column}`)}, 0))`

/**
 * Adds, to `shard`'s row of each batch, the changes `deltas` selects: a query with a row per
 * batch (batch_id unique) and every column of batch_progress but shard and changes, by name.
 * A data-modifying CTE of the caller's statement, so it commits with the lines it counts.
 */
export const addProgress = (db: Db, shard: string, deltas: postgres.Fragment) => db`
  INSERT INTO batch_progress AS bp (batch_id, shard, pending, running, succeeded, failed,
    cost_usd, held_usd, reserved_usd, usage_input_tokens, usage_cached_input_tokens,
    usage_cache_write_tokens, usage_output_tokens, usage_uncached_cost_usd, changes)
  SELECT d.batch_id, ${shard}::text, d.pending, d.running, d.succeeded, d.failed, d.cost_usd,
    d.held_usd, d.reserved_usd, d.usage_input_tokens, d.usage_cached_input_tokens,
    d.usage_cache_write_tokens, d.usage_output_tokens, d.usage_uncached_cost_usd, 1
  FROM (${deltas}) d
  ORDER BY d.batch_id
  ON CONFLICT (batch_id, shard) DO UPDATE SET pending = bp.pending + excluded.pending,
    running = bp.running + excluded.running, succeeded = bp.succeeded + excluded.succeeded,
    failed = bp.failed + excluded.failed, cost_usd = bp.cost_usd + excluded.cost_usd,
    held_usd = bp.held_usd + excluded.held_usd,
    reserved_usd = bp.reserved_usd + excluded.reserved_usd,
    usage_input_tokens = bp.usage_input_tokens + excluded.usage_input_tokens,
    usage_cached_input_tokens = bp.usage_cached_input_tokens + excluded.usage_cached_input_tokens,
    usage_cache_write_tokens = bp.usage_cache_write_tokens + excluded.usage_cache_write_tokens,
    usage_output_tokens = bp.usage_output_tokens + excluded.usage_output_tokens,
    usage_uncached_cost_usd = bp.usage_uncached_cost_usd + excluded.usage_uncached_cost_usd,
    changes = bp.changes + 1`

/**
 * Lines moved between pending and running, per batch, as `addProgress` reads them: `n` lines
 * (negative to hand them back) and the ceilings they reserve.
 */
export const movedDeltas = (db: Db, moved: postgres.Fragment) => db`
  SELECT batch_id, -n AS pending, n AS running, 0 AS succeeded, 0 AS failed, 0 AS cost_usd,
    0 AS held_usd, reserved AS reserved_usd, 0 AS usage_input_tokens,
    0 AS usage_cached_input_tokens, 0 AS usage_cache_write_tokens, 0 AS usage_output_tokens,
    0 AS usage_uncached_cost_usd
  FROM (${moved}) m`

/**
 * The fold, in the statement that gives ended batches their terminal status: deletes their
 * shards and returns their sums as `folded`, which the caller's UPDATE adds to the rows (see
 * foldedColumns). Nothing writes a shard of a batch with no line pending or running.
 */
export const foldedShards = (db: Db, batchIds: readonly string[]) => db`
  gone AS (DELETE FROM batch_progress WHERE batch_id = ANY(${[...batchIds]}::text[]) RETURNING *),
  folded AS (
    SELECT batch_id, sum(pending) AS pending, sum(running) AS running, sum(succeeded) AS succeeded,
      sum(failed) AS failed, sum(cost_usd) AS cost_usd, sum(reserved_usd) AS reserved_usd,
      sum(usage_input_tokens) AS usage_input_tokens,
      sum(usage_cached_input_tokens) AS usage_cached_input_tokens,
      sum(usage_cache_write_tokens) AS usage_cache_write_tokens,
      sum(usage_output_tokens) AS usage_output_tokens,
      sum(usage_uncached_cost_usd) AS usage_uncached_cost_usd, sum(changes) AS changes
    FROM gone GROUP BY batch_id)`

/** The assignments that add `f` (a row of `folded`, or nulls) to batch row `b`. */
export const foldedColumns = (db: Db) => db`
  pending = b.pending + coalesce(f.pending, 0), running = b.running + coalesce(f.running, 0),
  succeeded = b.succeeded + coalesce(f.succeeded, 0), failed = b.failed + coalesce(f.failed, 0),
  cost_usd = b.cost_usd + coalesce(f.cost_usd, 0),
  reserved_usd = GREATEST(0, b.reserved_usd + coalesce(f.reserved_usd, 0)),
  usage_input_tokens = b.usage_input_tokens + coalesce(f.usage_input_tokens, 0),
  usage_cached_input_tokens = b.usage_cached_input_tokens + coalesce(f.usage_cached_input_tokens, 0),
  usage_cache_write_tokens = b.usage_cache_write_tokens + coalesce(f.usage_cache_write_tokens, 0),
  usage_output_tokens = b.usage_output_tokens + coalesce(f.usage_output_tokens, 0),
  usage_uncached_cost_usd = b.usage_uncached_cost_usd + coalesce(f.usage_uncached_cost_usd, 0),
  version = b.version + coalesce(f.changes, 0)`
