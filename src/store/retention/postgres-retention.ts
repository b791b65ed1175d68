/**
 * Retention on PostgreSQL. Every instance runs the janitor; `FOR UPDATE SKIP LOCKED` hands each
 * batch or file to exactly one of them, so the work is never done twice.
 */
import type { PostgresPool } from '../connection.ts'
import type { PurgeStore } from './retention-store.ts'

type Db = PostgresPool

/** Retention's own deletes on PostgreSQL. */
export function createPostgresRetentionStore(sql: PostgresPool): PurgeStore {
  return {
    purgeResults: (cutoff, limit, now) => purgeResults(sql, cutoff, limit, now),
    deleteStaleUploads: (cutoff, limit, now) => deleteStaleUploads(sql, cutoff, limit, now),
  }
}

export async function purgeResults(
  sql: Db,
  cutoff: number,
  limit: number,
  now: number,
): Promise<string[]> {
  return sql.begin(async (tx) => {
    // Batch rows first, then their lines: the lock order every other transaction uses.
    const picked = await tx`
      WITH picked AS (
        SELECT id FROM batches
        WHERE finished_at < ${cutoff} AND purged_at IS NULL
        ORDER BY finished_at LIMIT ${limit}
        FOR UPDATE SKIP LOCKED)
      UPDATE batches b SET purged_at = ${now} FROM picked WHERE b.id = picked.id
      RETURNING b.id`
    const ids = picked.map((row) => row.id as string)
    if (ids.length > 0) {
      await tx`DELETE FROM lines WHERE batch_id = ANY(${ids}::text[])`
      await tx`DELETE FROM files WHERE batch_id = ANY(${ids}::text[])`
      // The webhook delivery log is kept as long as the results (its retries ended long ago).
      await tx`DELETE FROM webhook_deliveries WHERE batch_id = ANY(${ids}::text[])`
    }
    return ids
  })
}

export async function deleteStaleUploads(
  sql: Db,
  cutoff: number,
  limit: number,
  now: number,
): Promise<string[]> {
  const rows = await sql`
    DELETE FROM files WHERE id IN (
      SELECT id FROM files WHERE kind = 'upload'
        AND (last_used_at < ${cutoff} OR expires_at <= ${now})
      LIMIT ${limit} FOR UPDATE SKIP LOCKED)
    RETURNING id`
  return rows.map((row) => row.id as string)
}
