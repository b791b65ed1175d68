/** The planner's projected finish of open batches on the embedded store (whole seconds). */
import { sqliteQuery as q, type SqliteConnection as Database } from '../connection.ts'

const immediate = <T>(db: Database, fn: () => T): T => db.transaction(fn).immediate()

export async function recordEtas(
  db: Database,
  etas: readonly { batchId: string; eta: number | null }[],
) {
  if (etas.length === 0) return
  // Whole seconds, as on PostgreSQL; a row whose eta is unchanged is not written again.
  const set = q(
    db,
    `UPDATE batches SET eta = ?1
     WHERE id = ?2 AND status IN ('in_progress', 'cancelling') AND eta IS NOT ?1`,
  )
  immediate(db, () => {
    for (const { batchId, eta } of etas) set.run(eta === null ? null : Math.ceil(eta), batchId)
  })
}
