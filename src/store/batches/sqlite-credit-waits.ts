/**
 * The daily spend limit and the batches waiting for credit on the embedded store (docs/money-and-limits.md,
 * §14; the rules are ../daily-spend.ts's). A batch waiting for credit is `validating` with
 * waiting_code 'insufficient_credit', holding nothing, until waiting_until. Each function runs
 * inside the caller's IMMEDIATE transaction, so what it reads is what the account holds when it
 * writes.
 */
import type { SqliteConnection as Database } from '../connection.ts'
import { Money, moneyText } from '../../money/decimal.ts'
import { creditWaitFailure, planCreditWaits, rowHold } from '../credit/daily-spend.ts'
import type { WaitingPass } from './batch-store.ts'
import { leasedUsd } from '../credit/sqlite-leases.ts'
import { enqueueWebhookEvents } from '../webhooks/sqlite-webhooks.ts'

type Row = Record<string, any>
const q = (db: Database, sql: string) => db.query<Row, any[]>(sql)

// The daily spend limit's reads are the credit role's; admission reads them through here.
export { dailyUsed } from '../credit/sqlite-daily-spend.ts'

const WAITING = `status = 'validating' AND waiting_code = 'insufficient_credit'`

/** Whether any batch waits for credit (through the index of open batches). */
export const anyWaiting = (db: Database) =>
  q(db, `SELECT 1 FROM batches WHERE ${WAITING} LIMIT 1`).get() !== null

/** The holds of the account's batches waiting for credit, oldest first. */
export const waitingHolds = (db: Database, accountId: string) =>
  q(
    db,
    `SELECT cost_ceiling_usd, max_cost_usd FROM batches WHERE account_id = ? AND ${WAITING}
     ORDER BY created_at, id`,
  )
    .all(accountId)
    .map(rowHold)

export function admitWaitingBatches(db: Database, nowMs: number): WaitingPass {
  const now = Math.floor(nowMs / 1000)
  const pass: WaitingPass = { started: [], failed: [], failedLines: 0 }
  const accounts = q(db, `SELECT DISTINCT account_id FROM batches WHERE ${WAITING}`).all()
  for (const { account_id: accountId } of accounts) {
    const account = q(db, 'SELECT balance_usd, held_usd FROM accounts WHERE id = ?').get(accountId)!
    // Live leases hold credit too, as at admission.
    const available = new Money(account.balance_usd)
      .minus(account.held_usd)
      .minus(leasedUsd(db, accountId, nowMs))
    const waiting = q(
      db,
      `SELECT id, cost_ceiling_usd, max_cost_usd, waiting_until, waiting_message FROM batches
       WHERE account_id = ? AND ${WAITING} ORDER BY created_at, id`,
    ).all(accountId)
    // Those whose wait is over fail; the others start in order while the credit covers them.
    const live: Row[] = []
    for (const batch of waiting) {
      if (Number(batch.waiting_until) > now) live.push(batch)
      else {
        pass.failedLines += failWaitingBatch(db, batch, accountId, now)
        pass.failed.push(batch.id)
      }
    }
    const { start, messages, taken } = planCreditWaits(live, available)
    for (const { id, hold } of start) {
      q(
        db,
        `UPDATE batches SET status = 'in_progress', held_usd = ?, waiting_code = NULL,
           waiting_message = NULL, waiting_until = NULL WHERE id = ?`,
      ).run(moneyText(hold), id)
      pass.started.push(id)
    }
    for (const { id, message } of messages)
      q(db, 'UPDATE batches SET waiting_message = ? WHERE id = ?').run(message, id)
    const held = new Money(account.held_usd).plus(taken)
    q(db, 'UPDATE accounts SET held_usd = ? WHERE id = ?').run(moneyText(held), accountId)
  }
  return pass
}

/**
 * Every line failed unbilled, the batch `failed` with the reason (it never held anything), and
 * its webhooks told, as of any batch that ends; returns how many lines failed.
 */
function failWaitingBatch(db: Database, batch: Row, accountId: string, now: number): number {
  const message = creditWaitFailure(moneyText(rowHold(batch)), Number(batch.waiting_until))
  const n = q(
    db,
    `UPDATE lines SET status = 'failed', error_code = 'insufficient_quota', error_message = ?,
       cost_usd = '0', finished_at = ? WHERE batch_id = ? AND status = 'pending'`,
  ).run(message, now, batch.id).changes
  q(
    db,
    `UPDATE batches SET status = 'failed', pending = pending - ?, failed = failed + ?,
       finished_at = ?, held_usd = '0', waiting_code = NULL, waiting_message = NULL,
       waiting_until = NULL, errors = ? WHERE id = ?`,
  ).run(
    n,
    n,
    now,
    JSON.stringify([{ code: 'insufficient_quota', message, param: null, line: null }]),
    batch.id,
  )
  enqueueWebhookEvents(db, { id: batch.id, accountId, status: 'failed' }, now)
  return n
}
