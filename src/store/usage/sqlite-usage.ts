/** Usage rows on bun:sqlite (docs/operations.md): sums added in one immediate transaction, money as text. */
import { Money, moneyText } from '../../money/decimal.ts'
import type { Row, SqliteConnection } from '../connection.ts'
import { toUsageRow, type UsageAddition, type UsageRow, type UsageStore } from './usage-store.ts'

type Database = SqliteConnection

/** The usage store on bun:sqlite. */
export function createSqliteUsageStore(db: SqliteConnection): UsageStore {
  return {
    async addUsage(rows) {
      addUsage(db, rows)
    },
    async usageRows(accountId, fromDay, toDay) {
      return usageRows(db, accountId, fromDay, toDay)
    },
  }
}

export function addUsage(db: Database, rows: readonly UsageAddition[]) {
  if (rows.length === 0) return
  const read = db.query<Row, any[]>(
    `SELECT cost_usd, first_offering_cost_usd FROM usage_daily
     WHERE account_id = ? AND day = ? AND model = ? AND provider = ?`,
  )
  const write = db.query<Row, any[]>(
    `INSERT INTO usage_daily (account_id, day, model, provider, lines, live_calls, input_tokens,
       cached_input_tokens, output_tokens, cost_usd, first_offering_cost_usd)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (account_id, day, model, provider) DO UPDATE SET
       lines = lines + excluded.lines, live_calls = live_calls + excluded.live_calls,
       input_tokens = input_tokens + excluded.input_tokens,
       cached_input_tokens = cached_input_tokens + excluded.cached_input_tokens,
       output_tokens = output_tokens + excluded.output_tokens,
       cost_usd = excluded.cost_usd, first_offering_cost_usd = excluded.first_offering_cost_usd`,
  )
  db.transaction(() => {
    for (const r of rows) {
      // Decimal text cannot be summed in SQL exactly: read, add with decimal.js, write back.
      const before = read.get(r.accountId, r.day, r.model, r.provider)
      const cost = new Money(before?.cost_usd ?? '0').plus(r.costUsd)
      const first = new Money(before?.first_offering_cost_usd ?? '0').plus(r.firstOfferingCostUsd)
      write.run(
        r.accountId,
        r.day,
        r.model,
        r.provider,
        r.lines,
        r.liveCalls,
        r.inputTokens,
        r.cachedInputTokens,
        r.outputTokens,
        moneyText(cost),
        moneyText(first),
      )
    }
  }).immediate()
}

export function usageRows(db: Database, accountId: string, from: string, to: string): UsageRow[] {
  return db
    .query<Row, any[]>(
      `SELECT * FROM usage_daily WHERE account_id = ? AND day >= ? AND day <= ?
       ORDER BY day, model, provider`,
    )
    .all(accountId, from, to)
    .map(toUsageRow)
}
