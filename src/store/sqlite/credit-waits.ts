/**
 * The daily spend limit and the batches waiting for credit on the embedded store (SPEC §12,
 * §14; the rules are ../daily-spend.ts's). A batch waiting for credit is `validating` with
 * waiting_code 'insufficient_credit', holding nothing, until waiting_until. Each function runs
 * inside the caller's IMMEDIATE transaction, so what it reads is what the account holds when it
 * writes.
 */
import type { Database } from 'bun:sqlite'
import { Money, moneyText, ZERO } from '../../money/decimal.ts'
import {
  batchDailyUse,
  batchHold,
  creditWaitFailure,
  creditWaitMessage,
  dayStartSeconds,
  liveSpentOn,
} from '../daily-spend.ts'
import type { DailySpend, WaitingPass } from '../store.ts'
import { leasedUsd } from './leases.ts'
import { enqueueWebhookEvents } from './webhooks.ts'

type Row = Record<string, any>
const q = (db: Database, sql: string) => db.query<Row, any[]>(sql)

/** What counts against the daily limit on the day of `nowMs` (getDailySpend in store.ts). */
export function dailyUsed(db: Database, account: Row, nowMs: number): Money {
  let used = liveSpentOn(account, nowMs).plus(leasedUsd(db, account.id, nowMs))
  for (const row of q(
    db,
    `SELECT status, waiting_code, cost_ceiling_usd, max_cost_usd, cost_usd, held_usd FROM batches
     WHERE account_id = ? AND created_at >= ?`,
  ).all(account.id, dayStartSeconds(nowMs))) {
    used = used.plus(batchDailyUse(row))
  }
  return used
}

export function getDailySpend(db: Database, accountId: string, nowMs: number): DailySpend | null {
  const account = q(db, 'SELECT * FROM accounts WHERE id = ?').get(accountId)
  if (!account) return null
  return {
    limitUsd:
      account.daily_spend_limit_usd === null ? null : moneyText(account.daily_spend_limit_usd),
    usedUsd: moneyText(dailyUsed(db, account, nowMs)),
  }
}

const WAITING = `status = 'validating' AND waiting_code = 'insufficient_credit'`

/** Whether any batch waits for credit (through the index of open batches). */
export const anyWaiting = (db: Database) =>
  q(db, `SELECT 1 FROM batches WHERE ${WAITING} LIMIT 1`).get() !== null

/** The holds of the account's batches waiting for credit. */
export const waitingHolds = (db: Database, accountId: string) =>
  q(db, `SELECT cost_ceiling_usd, max_cost_usd FROM batches WHERE account_id = ? AND ${WAITING}`)
    .all(accountId)
    .map(batchHold)

export function admitWaitingBatches(db: Database, nowMs: number): WaitingPass {
  const now = Math.floor(nowMs / 1000)
  const pass: WaitingPass = { started: [], failed: [] }
  const accounts = q(db, `SELECT DISTINCT account_id FROM batches WHERE ${WAITING}`).all()
  for (const { account_id: accountId } of accounts) {
    const account = q(db, 'SELECT balance_usd, held_usd FROM accounts WHERE id = ?').get(accountId)!
    let held = new Money(account.held_usd)
    // Live leases hold credit too, as at admission.
    let available = new Money(account.balance_usd)
      .minus(held)
      .minus(leasedUsd(db, accountId, nowMs))
    let ahead = ZERO
    let blocked = false
    const waiting = q(
      db,
      `SELECT id, cost_ceiling_usd, max_cost_usd, waiting_until, waiting_message FROM batches
       WHERE account_id = ? AND ${WAITING} ORDER BY created_at, id`,
    ).all(accountId)
    for (const batch of waiting) {
      const hold = batchHold(batch)
      const until = Number(batch.waiting_until)
      if (until <= now) {
        failWaitingBatch(db, batch, accountId, now)
        pass.failed.push(batch.id)
      } else if (!blocked && hold.lessThanOrEqualTo(available)) {
        held = held.plus(hold)
        available = available.minus(hold)
        q(
          db,
          `UPDATE batches SET status = 'in_progress', held_usd = ?, waiting_code = NULL,
             waiting_message = NULL, waiting_until = NULL WHERE id = ?`,
        ).run(moneyText(hold), batch.id)
        pass.started.push(batch.id)
      } else {
        // Earliest first: what this one needs includes the holds of those before it still waiting.
        blocked = true
        ahead = ahead.plus(hold)
        const message = creditWaitMessage(hold, Money.max(ZERO, ahead.minus(available)), until)
        if (batch.waiting_message !== message)
          q(db, 'UPDATE batches SET waiting_message = ? WHERE id = ?').run(message, batch.id)
      }
    }
    q(db, 'UPDATE accounts SET held_usd = ? WHERE id = ?').run(moneyText(held), accountId)
  }
  return pass
}

/**
 * Every line failed unbilled, the batch `failed` with the reason (it never held anything), and
 * its webhooks told, as of any batch that ends.
 */
function failWaitingBatch(db: Database, batch: Row, accountId: string, now: number) {
  const message = creditWaitFailure(moneyText(batchHold(batch)), Number(batch.waiting_until))
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
}
