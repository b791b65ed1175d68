/** Usage rows on bun:sqlite (docs/operations.md): sums added in one immediate transaction, money as text. */
import type { Database } from 'bun:sqlite'
import { Money, moneyText } from '../../money/decimal.ts'
import type { UsageAddition, UsageRow } from '../store.ts'

type Row = Record<string, any>

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

export const toUsageRow = (row: Row): UsageRow => ({
  day: String(row.day),
  model: row.model,
  provider: row.provider,
  lines: Number(row.lines),
  liveCalls: Number(row.live_calls),
  inputTokens: Number(row.input_tokens),
  cachedInputTokens: Number(row.cached_input_tokens),
  outputTokens: Number(row.output_tokens),
  costUsd: moneyText(String(row.cost_usd)),
  firstOfferingCostUsd: moneyText(String(row.first_offering_cost_usd)),
})
