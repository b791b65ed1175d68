/**
 * Starting in time on the embedded store (docs/open-models.md; the rule is start-in-time.ts's): the
 * in-progress batches that have not started a line by their start-by time fail, every line
 * failed unbilled, their holds given back to their accounts. Runs inside the caller's IMMEDIATE
 * transaction, so a claim cannot start one of them meanwhile.
 */
import type { SqliteConnection as Database } from '../connection.ts'
import { Money, moneyText } from '../../money/decimal.ts'
import {
  CAPACITY_UNAVAILABLE,
  capacityUnavailableMessage,
  NO_LINE_STARTED_SQL,
  START_BY_SQL,
  startBySeconds,
} from './start-in-time.ts'
import { enqueueWebhookEvents } from '../webhooks/sqlite-webhooks.ts'
import { foldIntoRow } from '../dispatch/sqlite-batch-progress.ts'
import type { UnstartedFailed } from './batch-store.ts'

type Row = Record<string, any>
const q = (db: Database, sql: string) => db.query<Row, any[]>(sql)

const UNSTARTED = `status = 'in_progress' AND created_at + ${START_BY_SQL} <= ?
  AND ${NO_LINE_STARTED_SQL}`

/** Whether any batch is past its start-by time unstarted (a read, before taking the write lock). */
export const anyUnstarted = (db: Database, now: number) =>
  q(db, `SELECT 1 FROM batches WHERE ${UNSTARTED} LIMIT 1`).get(now) !== null

/** Fails them; returns their ids. */
export function failUnstartedBatches(db: Database, now: number): UnstartedFailed {
  const batches = q(
    db,
    `SELECT id, account_id, held_usd, created_at, completion_window_hours FROM batches
     WHERE ${UNSTARTED}`,
  ).all(now)
  let lines = 0
  for (const batch of batches) {
    const hours = Number(batch.completion_window_hours)
    const startBy = Number(batch.created_at) + startBySeconds(hours)
    const message = capacityUnavailableMessage(hours, startBy)
    // Lines taken up and handed back left shards (netting to nothing): folded, as at any end.
    foldIntoRow(db, batch.id)
    const n = q(
      db,
      `UPDATE lines SET status = 'failed', error_code = ?, error_message = ?, cost_usd = '0',
         finished_at = ? WHERE batch_id = ? AND status = 'pending'`,
    ).run(CAPACITY_UNAVAILABLE, message, now, batch.id).changes
    lines += n
    const errors = [{ code: CAPACITY_UNAVAILABLE, message, param: null, line: null }]
    q(
      db,
      `UPDATE batches SET status = 'failed', pending = pending - ?, failed = failed + ?,
         finished_at = ?, started_at = NULL, held_usd = '0', waiting_code = NULL, waiting_message = NULL,
         waiting_until = NULL, errors = ? WHERE id = ?`,
    ).run(n, n, now, JSON.stringify(errors), batch.id)
    const account = q(db, 'SELECT held_usd FROM accounts WHERE id = ?').get(batch.account_id)!
    const held = Money.max(new Money(account.held_usd).minus(batch.held_usd), 0)
    q(db, 'UPDATE accounts SET held_usd = ? WHERE id = ?').run(moneyText(held), batch.account_id)
    enqueueWebhookEvents(db, { id: batch.id, accountId: batch.account_id, status: 'failed' }, now)
  }
  return { failed: batches.map((batch) => batch.id as string), lines }
}
