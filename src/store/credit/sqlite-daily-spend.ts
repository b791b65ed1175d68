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
  const day = dayStartSeconds(nowMs)
  // A batch's cost and hold are its row plus its progress shards (docs/scale.md), decimal TEXT
  // summed here; read in one transaction, so a fold between the two reads cannot count twice.
  db.transaction(() => {
    const shards = q(
      db,
      `SELECT p.batch_id, p.cost_usd, p.held_usd FROM batch_progress p
       JOIN batches b ON b.id = p.batch_id WHERE b.account_id = ? AND b.created_at >= ?`,
    ).all(account.id, day)
    for (const row of q(
      db,
      `SELECT id, status, waiting_code, cost_ceiling_usd, max_cost_usd, cost_usd, held_usd
       FROM batches WHERE account_id = ? AND created_at >= ?`,
    ).all(account.id, day)) {
      let cost = new Money(row.cost_usd)
      let held = new Money(row.held_usd)
      for (const shard of shards)
        if (shard.batch_id === row.id) {
          cost = cost.plus(shard.cost_usd)
          held = held.plus(shard.held_usd)
        }
      used = used.plus(
        batchDailyUse({ ...row, cost_usd: cost.toFixed(), held_usd: held.toFixed() }),
      )
    }
  })()
  return used
}

export function getDailySpend(db: Database, accountId: string, nowMs: number): DailySpend | null {
  const account = q(db, 'SELECT * FROM accounts WHERE id = ?').get(accountId)
  if (!account) return null
  return dailySpendOf(account, dailyUsed(db, account, nowMs))
}
