/**
 * Usage (docs/operations.md): each account's tokens and cost by UTC day, model and provider, the
 * sums of every instance's additions. One implementation a dialect (sqlite-usage.ts,
 * postgres-usage.ts), one contract (test/store/usage.test.ts).
 */
import { moneyText } from '../../money/decimal.ts'
import type { Row } from '../connection.ts'

/** One instance's additions to an account's usage of one UTC day, model and provider (docs/operations.md). */
export interface UsageAddition {
  accountId: string
  /** YYYY-MM-DD, UTC. */
  day: string
  model: string
  provider: string
  lines: number
  liveCalls: number
  inputTokens: number
  cachedInputTokens: number
  outputTokens: number
  costUsd: string
  /** The same usage priced on the model's first listed offering (what routing saved against). */
  firstOfferingCostUsd: string
}

/** A stored usage row: the sums of every instance's additions. */
export type UsageRow = Omit<UsageAddition, 'accountId'>

export interface UsageStore {
  /** Adds to the rows (creating them), in one transaction. */
  addUsage(rows: readonly UsageAddition[]): Promise<void>
  /** The account's rows from `fromDay` to `toDay` (YYYY-MM-DD, both inclusive), by day. */
  usageRows(accountId: string, fromDay: string, toDay: string): Promise<UsageRow[]>
}

/** A row of either dialect → a usage row. */
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
