/**
 * The daily spend limit and the batches waiting for credit on PostgreSQL (docs/money-and-limits.md, docs/open-models.md; the
 * rules are ../daily-spend.ts's). What counts against the limit is read under the account's row
 * lock (admission, live leases and live charges all take it first), so two instances never
 * both spend the same room under the limit.
 */
import type postgres from 'postgres'
import { Money, moneyText } from '../../money/decimal.ts'
import { creditWaitFailure, planCreditWaits, rowHold } from '../credit/daily-spend.ts'
import type { WaitingPass } from './batch-store.ts'
import { failUnstartedBatch } from './postgres-fail-unstarted.ts'
import { enqueueWebhookEvents } from '../webhooks/postgres-webhooks.ts'

type Row = Record<string, any>
type Db = postgres.ISql

// The daily spend limit's reads are the credit role's; admission reads them through here.
export { dailyUsed } from '../credit/postgres-daily-spend.ts'

/**
 * The holds of the account's batches waiting for credit, oldest first (inside admission's
 * transaction).
 */
export async function waitingHolds(db: Db, accountId: string): Promise<Money[]> {
  const rows = await db`
    SELECT cost_ceiling_usd, max_cost_usd FROM batches
    WHERE account_id = ${accountId} AND status = 'validating' AND waiting_code = 'insufficient_credit'
    ORDER BY created_at, id`
  return rows.map(rowHold)
}

export async function admitWaitingBatches(sql: postgres.Sql, nowMs: number): Promise<WaitingPass> {
  const pass: WaitingPass = { started: [], failed: [], failedLines: 0 }
  const accounts = await sql`
    SELECT DISTINCT account_id FROM batches
    WHERE status = 'validating' AND waiting_code = 'insufficient_credit'`
  for (const { account_id: accountId } of accounts) {
    const done = await sql.begin((tx) => admitAccount(tx, accountId, nowMs))
    pass.started.push(...done.started)
    pass.failed.push(...done.failed)
    pass.failedLines += done.failedLines
  }
  return pass
}

/**
 * One account's waiting batches in one transaction. Lock order as everywhere (sql/0001_init.sql):
 * its waiting batches by id, then the account. A batch another instance started or failed in
 * the meantime no longer matches once its lock is granted, so it is not taken twice.
 */
async function admitAccount(
  tx: postgres.TransactionSql,
  accountId: string,
  nowMs: number,
): Promise<WaitingPass> {
  const now = Math.floor(nowMs / 1000)
  const pass: WaitingPass = { started: [], failed: [], failedLines: 0 }
  const waiting = await tx`
    SELECT id, created_at, cost_ceiling_usd, max_cost_usd, waiting_until, waiting_message FROM batches
    WHERE account_id = ${accountId} AND status = 'validating' AND waiting_code = 'insufficient_credit'
    ORDER BY id FOR UPDATE`
  // Those whose wait is over first: their lines are locked before the account, as everywhere.
  const live: Row[] = []
  for (const batch of waiting) {
    if (Number(batch.waiting_until) > now) live.push(batch)
    else {
      pass.failedLines += await failWaitingBatch(tx, batch, accountId, now)
      pass.failed.push(batch.id)
    }
  }
  if (live.length === 0) return pass
  const [account] =
    await tx`SELECT balance_usd, held_usd FROM accounts WHERE id = ${accountId} FOR NO KEY UPDATE`
  const [leased] = await tx`
    SELECT coalesce(sum(amount_usd), 0) AS total FROM credit_leases
    WHERE account_id = ${accountId} AND expires_at_ms > ${nowMs}`
  const available = new Money(account!.balance_usd).minus(account!.held_usd).minus(leased!.total)
  // Earliest first (ids are time-ordered too, but created_at is what the submitter saw).
  live.sort((a, b) => Number(a.created_at) - Number(b.created_at) || (a.id < b.id ? -1 : 1))
  const { start, messages, taken } = planCreditWaits(live, available)
  for (const { id, hold } of start) {
    await tx`
      UPDATE batches SET status = 'in_progress', held_usd = ${moneyText(hold)}::numeric,
        waiting_code = NULL, waiting_message = NULL, waiting_until = NULL
      WHERE id = ${id}`
    pass.started.push(id)
  }
  for (const { id, message } of messages)
    await tx`UPDATE batches SET waiting_message = ${message} WHERE id = ${id}`
  if (taken.greaterThan(0))
    await tx`UPDATE accounts SET held_usd = held_usd + ${moneyText(taken)}::numeric WHERE id = ${accountId}`
  return pass
}

/**
 * Every line failed unbilled, the batch `failed` with the reason (it never held anything), and
 * its webhooks told, as of any batch that ends; returns how many lines failed.
 */
async function failWaitingBatch(
  tx: postgres.TransactionSql,
  batch: Row,
  accountId: string,
  now: number,
) {
  const message = creditWaitFailure(moneyText(rowHold(batch)), Number(batch.waiting_until))
  const lines = await failUnstartedBatch(tx, {
    batchId: batch.id,
    code: 'insufficient_quota',
    message,
    now,
  })
  await enqueueWebhookEvents(tx, [{ id: batch.id, accountId, status: 'failed' }], now)
  return lines
}
