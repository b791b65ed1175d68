/**
 * Credit on bun:sqlite: the daily spend limit's reads and writes here, live leases and charge
 * groups in sqlite-live-credit.ts, what leases hold in sqlite-leases.ts. What a live lease or
 * charge changes runs in an IMMEDIATE transaction, so a lease and a batch hold never both take
 * the same credit.
 */
import { Money, moneyText } from '../../money/decimal.ts'
import { sqliteQuery as q, type Row, type SqliteConnection } from '../connection.ts'
import type { DailySpend, DailySpendStore, LiveCreditStore } from './credit-store.ts'
import { batchDailyUse, dailySpendOf, dayStartSeconds, liveSpentOn } from './daily-spend.ts'
import { leasedUsd } from './sqlite-leases.ts'
import * as liveCredit from './sqlite-live-credit.ts'

type Database = SqliteConnection

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
      return tx(() => liveCredit.renewLiveCredit(db, instanceId, accountIds, nowMs, expiresAtMs))
    },
    async writeLiveCharges(group) {
      return tx(() => liveCredit.writeLiveCharges(db, group))
    },
    async dropLiveCredit(instanceId) {
      q(db, 'DELETE FROM credit_leases WHERE instance_id = ?').run(instanceId)
    },
  }
}

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
  return dailySpendOf(account, dailyUsed(db, account, nowMs))
}
