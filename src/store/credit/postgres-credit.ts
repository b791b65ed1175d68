/**
 * Credit on PostgreSQL: the daily spend limit's reads and writes here, live leases and charge
 * groups in postgres-live-credit.ts. What counts against the limit is read under the account's
 * row lock (admission, live leases and live charges all take it first), so two instances never
 * both spend the same room under the limit.
 */
import { Money, moneyText } from '../../money/decimal.ts'
import type { PostgresPool, PostgresQueries, Row } from '../connection.ts'
import type { DailySpend, DailySpendStore, LiveCreditStore } from './credit-store.ts'
import { batchDailyUse, dailySpendOf, dayStartSeconds, liveSpentOn } from './daily-spend.ts'
import * as liveCredit from './postgres-live-credit.ts'

type Db = PostgresQueries

/** The credit store on PostgreSQL. */
export function createPostgresCreditStore(sql: PostgresPool): DailySpendStore & LiveCreditStore {
  return {
    getDailySpend: (accountId, nowMs) => getDailySpend(sql, accountId, nowMs),
    async setDailySpendLimit(accountId, limitUsd) {
      const rows = await sql`
        UPDATE accounts SET daily_spend_limit_usd = ${limitUsd === null ? null : moneyText(limitUsd)}::numeric
        WHERE id = ${accountId} RETURNING id`
      return rows.length > 0
    },
    takeLiveCredit: (request) => liveCredit.takeLiveCredit(sql, request),
    renewLiveCredit: (instanceId, accountIds, nowMs, expiresAtMs) =>
      liveCredit.renewLiveCredit(sql, instanceId, accountIds, nowMs, expiresAtMs),
    writeLiveCharges: (group) => liveCredit.writeLiveCharges(sql, group),
    async dropLiveCredit(instanceId) {
      await sql`DELETE FROM credit_leases WHERE instance_id = ${instanceId}`
    },
  }
}

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
