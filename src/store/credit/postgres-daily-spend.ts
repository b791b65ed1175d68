/**
 * The daily spend limit's reads on PostgreSQL (the rules are daily-spend.ts's), under the
 * account's row lock when the caller holds it.
 */
import { Money } from '../../money/decimal.ts'
import type { PostgresQueries, Row } from '../connection.ts'
import type { DailySpend } from './credit-store.ts'
import { batchDailyUse, dailySpendOf, dayStartSeconds, liveSpentOn } from './daily-spend.ts'

type Db = PostgresQueries

/** What counts against the daily limit on the day of `nowMs`, for an account row as read. */
export async function dailyUsed(db: Db, account: Row, nowMs: number): Promise<Money> {
  // A batch's cost and hold are its row plus its progress shards (docs/scale.md).
  const batches = await db`
    SELECT b.status, b.waiting_code, b.cost_ceiling_usd, b.max_cost_usd,
      b.cost_usd + coalesce(p.cost_usd, 0) AS cost_usd, b.held_usd + coalesce(p.held_usd, 0) AS held_usd
    FROM batches b LEFT JOIN LATERAL (
      SELECT sum(cost_usd) AS cost_usd, sum(held_usd) AS held_usd FROM batch_progress
      WHERE batch_id = b.id) p ON true
    WHERE b.account_id = ${account.id} AND b.created_at >= ${dayStartSeconds(nowMs)}`
  const [leased] = await db`
    SELECT coalesce(sum(amount_usd), 0) AS total FROM credit_leases
    WHERE account_id = ${account.id} AND expires_at_ms > ${nowMs}`
  return batches.reduce<Money>(
    (sum, row) => sum.plus(batchDailyUse(row)),
    liveSpentOn(account, nowMs).plus(leased!.total),
  )
}

export async function getDailySpend(
  db: Db,
  accountId: string,
  nowMs: number,
): Promise<DailySpend | null> {
  const [account] = await db`SELECT * FROM accounts WHERE id = ${accountId}`
  if (!account) return null
  return dailySpendOf(account, await dailyUsed(db, account, nowMs))
}
