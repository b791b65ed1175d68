/** Retention's own deletes on bun:sqlite: one process writes the file, so nothing races them. */
import { sqliteQuery as q, type SqliteConnection } from '../connection.ts'
import type { PurgeStore } from './retention-store.ts'

/** Retention's own deletes on bun:sqlite. */
export function createSqliteRetentionStore(db: SqliteConnection): PurgeStore {
  return {
    async purgeResults(cutoff, limit, now) {
      return db
        .transaction(() => {
          const ids = q(
            db,
            `SELECT id FROM batches WHERE finished_at < ? AND purged_at IS NULL ORDER BY finished_at LIMIT ?`,
          )
            .all(cutoff, limit)
            .map((row) => row.id as string)
          for (const id of ids) {
            q(db, 'DELETE FROM lines WHERE batch_id = ?').run(id)
            q(db, 'DELETE FROM files WHERE batch_id = ?').run(id)
            // The webhook delivery log is kept as long as the results (its retries ended long ago).
            q(db, 'DELETE FROM webhook_deliveries WHERE batch_id = ?').run(id)
            q(db, 'UPDATE batches SET purged_at = ? WHERE id = ?').run(now, id)
          }
          return ids
        })
        .immediate()
    },
    async deleteStaleUploads(cutoff, limit, now) {
      return q(
        db,
        `DELETE FROM files WHERE id IN (
           SELECT id FROM files WHERE kind = 'upload' AND (last_used_at < ? OR expires_at <= ?)
           LIMIT ?) RETURNING id`,
      )
        .all(cutoff, now, limit)
        .map((row) => row.id as string)
    },
  }
}
