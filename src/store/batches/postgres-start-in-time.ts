/**
 * Starting in time on PostgreSQL (docs/open-models.md; the rule is start-in-time.ts's): the in-progress
 * batches that have not started a line by their start-by time fail, every line failed unbilled,
 * their holds given back. Each batch row is locked (SKIP LOCKED: another instance has it), then
 * its pending lines: a claim of a started batch takes no batch row, only lines (SKIP LOCKED), so
 * once they are held no claim can start it, and one that took lines first has committed and is
 * seen. A batch found started then is left alone; none is failed twice.
 */
import type postgres from 'postgres'
import {
  CAPACITY_UNAVAILABLE,
  capacityUnavailableMessage,
  LONG_WINDOW_HOURS,
  NO_LINE_STARTED_SQL,
  startBySeconds,
} from './start-in-time.ts'
import { enqueueWebhookEvents } from '../webhooks/postgres-webhooks.ts'
import { failUnstartedBatch } from './postgres-fail-unstarted.ts'
import type { UnstartedFailed } from './batch-store.ts'

const LONG_START_BY = startBySeconds(LONG_WINDOW_HOURS)

/** Fails them; returns their ids. */
export async function failUnstartedBatches(
  sql: postgres.Sql,
  now: number,
): Promise<UnstartedFailed> {
  // A read first, outside any transaction: every instance runs this every few seconds.
  const unstarted = (db: postgres.Sql | postgres.TransactionSql) => db`
    status = 'in_progress' AND created_at + CASE
      WHEN completion_window_hours >= ${LONG_WINDOW_HOURS} THEN ${LONG_START_BY}::bigint
      ELSE completion_window_hours * 1800 END <= ${now} AND ${db.unsafe(NO_LINE_STARTED_SQL)}`
  const due = await sql`SELECT id FROM batches WHERE ${unstarted(sql)} LIMIT 1`
  if (due.length === 0) return { failed: [], lines: 0 }
  return sql.begin(async (tx) => {
    const batches = await tx`
      SELECT id, account_id, held_usd, created_at, completion_window_hours FROM batches
      WHERE ${unstarted(tx)} ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED`
    const failed: string[] = []
    let lines = 0
    for (const batch of batches) {
      // Its pending lines held (the count is only for the locks), no claim can start it now.
      await tx`SELECT count(*) FROM (
        SELECT 1 FROM lines WHERE batch_id = ${batch.id} AND status = 'pending' FOR UPDATE) held`
      const [started] = await tx`
        SELECT 1 FROM lines WHERE batch_id = ${batch.id} AND (status <> 'pending' OR attempts > 0)
        LIMIT 1`
      if (started) continue
      const hours = Number(batch.completion_window_hours)
      const message = capacityUnavailableMessage(
        hours,
        Number(batch.created_at) + startBySeconds(hours),
      )
      lines += await failUnstartedBatch(tx, {
        batchId: batch.id,
        code: CAPACITY_UNAVAILABLE,
        message,
        now,
      })
      await tx`
        UPDATE accounts SET held_usd = greatest(held_usd - ${batch.held_usd}::numeric, 0)
        WHERE id = ${batch.account_id}`
      await enqueueWebhookEvents(
        tx,
        [{ id: batch.id, accountId: batch.account_id, status: 'failed' }],
        now,
      )
      failed.push(batch.id)
    }
    return { failed, lines }
  })
}
