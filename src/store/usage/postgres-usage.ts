/** Usage rows on PostgreSQL (docs/operations.md): one multi-row upsert, sums in numeric. */
import { moneyText } from '../../money/decimal.ts'
import type { PostgresPool } from '../connection.ts'
import { toUsageRow, type UsageAddition, type UsageRow, type UsageStore } from './usage-store.ts'

type Sql = PostgresPool

/** The usage store on PostgreSQL. */
export function createPostgresUsageStore(sql: PostgresPool): UsageStore {
  return {
    addUsage: (rows) => addUsage(sql, rows),
    usageRows: (accountId, fromDay, toDay) => usageRows(sql, accountId, fromDay, toDay),
  }
}

export async function addUsage(sql: Sql, rows: readonly UsageAddition[]) {
  if (rows.length === 0) return
  // In key order, so two instances adding to the same rows lock them in the same order.
  const sorted = [...rows].sort((a, b) =>
    `${a.accountId} ${a.day} ${a.model} ${a.provider}` <
    `${b.accountId} ${b.day} ${b.model} ${b.provider}`
      ? -1
      : 1,
  )
  const values = sorted.map((r) => ({
    account_id: r.accountId,
    day: r.day,
    model: r.model,
    provider: r.provider,
    lines: r.lines,
    live_calls: r.liveCalls,
    input_tokens: r.inputTokens,
    cached_input_tokens: r.cachedInputTokens,
    output_tokens: r.outputTokens,
    cost_usd: moneyText(r.costUsd),
    first_offering_cost_usd: moneyText(r.firstOfferingCostUsd),
  }))
  await sql`
    INSERT INTO usage_daily ${sql(values)}
    ON CONFLICT (account_id, day, model, provider) DO UPDATE SET
      lines = usage_daily.lines + excluded.lines,
      live_calls = usage_daily.live_calls + excluded.live_calls,
      input_tokens = usage_daily.input_tokens + excluded.input_tokens,
      cached_input_tokens = usage_daily.cached_input_tokens + excluded.cached_input_tokens,
      output_tokens = usage_daily.output_tokens + excluded.output_tokens,
      cost_usd = usage_daily.cost_usd + excluded.cost_usd,
      first_offering_cost_usd = usage_daily.first_offering_cost_usd + excluded.first_offering_cost_usd`
}

export async function usageRows(
  sql: Sql,
  accountId: string,
  from: string,
  to: string,
): Promise<UsageRow[]> {
  const rows = await sql`
    SELECT day, model, provider, lines, live_calls, input_tokens,
      cached_input_tokens, output_tokens, cost_usd::text AS cost_usd,
      first_offering_cost_usd::text AS first_offering_cost_usd
    FROM usage_daily
    WHERE account_id = ${accountId} AND day >= ${from} AND day <= ${to}
    ORDER BY day, model, provider`
  return rows.map(toUsageRow)
}
