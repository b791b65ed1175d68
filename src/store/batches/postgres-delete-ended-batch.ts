/** Deleting an ended batch on PostgreSQL, locked like every batch change (its row first). */
import type postgres from 'postgres'

/** An ended batch of the account and everything of it (docs/openai-facade.md's delete); false if none. */
export async function deleteEndedBatch(
  sql: postgres.Sql,
  accountId: string,
  id: string,
): Promise<boolean> {
  return sql.begin(async (tx) => {
    const found = await tx`
      SELECT id FROM batches
      WHERE id = ${id} AND account_id = ${accountId} AND finished_at IS NOT NULL
      FOR UPDATE`
    if (found.length === 0) return false
    await tx`DELETE FROM lines WHERE batch_id = ${id}`
    await tx`DELETE FROM files WHERE batch_id = ${id}`
    await tx`DELETE FROM webhook_deliveries WHERE batch_id = ${id}`
    await tx`DELETE FROM batch_providers WHERE batch_id = ${id}`
    // None should be left once it ended (folded); none may outlive it either way.
    await tx`DELETE FROM batch_progress WHERE batch_id = ${id}`
    await tx`DELETE FROM batches WHERE id = ${id}`
    return true
  })
}
