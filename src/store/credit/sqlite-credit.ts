/**
 * Credit on bun:sqlite: the daily spend limit (its reads in sqlite-daily-spend.ts), live leases
 * and charge groups (sqlite-live-credit.ts), what leases hold (sqlite-leases.ts). A live lease or
 * charge runs in an IMMEDIATE transaction, so a lease and a batch hold never both take the same
 * credit.
 */
import { moneyText } from '../../money/decimal.ts'
import { sqliteQuery as q, type SqliteConnection } from '../connection.ts'
import type { DailySpendStore, LiveCreditStore } from './credit-store.ts'
import { getDailySpend } from './sqlite-daily-spend.ts'
import * as liveCredit from './sqlite-live-credit.ts'

/** The credit store on bun:sqlite. */
export function createSqliteCreditStore(db: SqliteConnection): DailySpendStore & LiveCreditStore {
  const tx = <T>(fn: () => T): T => db.transaction(fn).immediate()
  return {
    async getDailySpend(accountId, nowMs) {
      return getDailySpend(db, accountId, nowMs)
    },
    async setDailySpendLimit(accountId, limitUsd) {
      return (
        q(db, 'UPDATE accounts SET daily_spend_limit_usd = ? WHERE id = ?').run(
          limitUsd === null ? null : moneyText(limitUsd),
          accountId,
        ).changes > 0
      )
    },
    async takeLiveCredit(request) {
      return tx(() => liveCredit.takeLiveCredit(db, request))
    },
    async renewLiveCredit(instanceId, accountIds, nowMs, expiresAtMs) {
      return tx(() =>
        liveCredit.renewLiveCredit(db, instanceId, accountIds, { nowMs, expiresAtMs }),
      )
    },
    async writeLiveCharges(group) {
      return tx(() => liveCredit.writeLiveCharges(db, group))
    },
    async dropLiveCredit(instanceId) {
      q(db, 'DELETE FROM credit_leases WHERE instance_id = ?').run(instanceId)
    },
  }
}
