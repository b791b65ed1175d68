/** The daily spend limit's reads on bun:sqlite (the rules are daily-spend.ts's). */
import { Money } from '../../money/decimal.ts'
import { sqliteQuery as q, type Row, type SqliteConnection } from '../connection.ts'
import type { DailySpend } from './credit-store.ts'
import { batchDailyUse, dailySpendOf, dayStartSeconds, liveSpentOn } from './daily-spend.ts'
import { leasedUsd } from './sqlite-leases.ts'

type Database = SqliteConnection

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
