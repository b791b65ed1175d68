/**
 * Credit on PostgreSQL: the daily spend limit (its reads in postgres-daily-spend.ts), live leases
 * and charge groups (postgres-live-credit.ts). What counts against the limit is read under the
 * account's row lock (admission, live leases and live charges all take it first), so two
 * instances never both spend the same room under the limit.
 */
import { moneyText } from '../../money/decimal.ts'
import type { PostgresPool } from '../connection.ts'
import type { DailySpendStore, LiveCreditStore } from './credit-store.ts'
import { getDailySpend } from './postgres-daily-spend.ts'
import * as liveCredit from './postgres-live-credit.ts'

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
      liveCredit.renewLiveCredit(sql, instanceId, accountIds, { nowMs, expiresAtMs }),
    writeLiveCharges: (group) => liveCredit.writeLiveCharges(sql, group),
    async dropLiveCredit(instanceId) {
      await sql`DELETE FROM credit_leases WHERE instance_id = ${instanceId}`
    },
  }
}
