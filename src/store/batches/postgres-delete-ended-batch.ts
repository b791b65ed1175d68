/** Deleting an ended batch on PostgreSQL, locked like every batch change (its row first). */
import type postgres from 'postgres'
import { moneyText } from '../../money/decimal.ts'
import { deletedBatchDailyUse, utcDay } from '../credit/daily-spend.ts'

/** An ended batch of the account and everything of it (docs/openai-facade.md's delete); false if none. */
export async function deleteEndedBatch(
  sql: postgres.Sql,
  accountId: string,
  id: string,
  nowMs: number,
): Promise<boolean> {
  return sql.begin(async (tx) => {
    const [found] = await tx`
      SELECT * FROM batches
      WHERE id = ${id} AND account_id = ${accountId} AND finished_at IS NOT NULL
      FOR UPDATE`
    if (!found) return false
    // Admitted today, it still counts against the daily limit (daily-spend.ts).
    const use = deletedBatchDailyUse(found, nowMs)
    if (!use.isZero()) {
      const day = utcDay(nowMs)
      await tx`
        UPDATE accounts SET
          live_spent_usd = CASE WHEN live_spend_day = ${day}
            THEN live_spent_usd + ${moneyText(use)}::numeric ELSE ${moneyText(use)}::numeric END,
          live_spend_day = ${day}
        WHERE id = ${accountId}`
    }
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
