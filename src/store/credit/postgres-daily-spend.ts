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
  const batches = await db`
    SELECT status, waiting_code, cost_ceiling_usd, max_cost_usd, cost_usd, held_usd FROM batches
    WHERE account_id = ${account.id} AND created_at >= ${dayStartSeconds(nowMs)}`
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
