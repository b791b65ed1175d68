/** Account and key rows of either dialect → records (bigint and numeric columns arrive as strings). */
import type { AccountRecord, KeyRecord, Scope } from '../../domain.ts'
import { moneyText } from '../../money/decimal.ts'
import { num, type Row } from '../connection.ts'

export function rowToAccount(row: Row): AccountRecord {
  return {
    id: row.id as string,
    name: row.name as string,
    balanceUsd: moneyText(row.balance_usd as string),
    heldUsd: moneyText(row.held_usd as string),
    maxOpenBatches: Number(row.max_open_batches),
    rateLimitPerMinute: Number(row.rate_limit_per_minute),
    createdAt: Number(row.created_at),
  }
}

export function rowToKey(row: Row): KeyRecord {
  return {
    id: row.id as string,
    accountId: row.account_id as string,
    name: (row.name as string | null) ?? null,
    scopes: String(row.scopes).split(',').filter(Boolean) as Scope[],
    rateLimitPerMinute: num(row.rate_limit_per_minute),
    createdAt: Number(row.created_at),
    revokedAt: num(row.revoked_at),
    prefix: row.prefix as string,
  }
}

/**
 * A key and its account read in one query (key columns as they are, the account's prefixed as
 * findKey and findSession select them): the caller of an authenticated request.
 */
export function rowToCaller(row: Row): { key: KeyRecord; account: AccountRecord } {
  const account = rowToAccount({
    id: row.account_id,
    name: row.account_name,
    balance_usd: row.balance_usd,
    held_usd: row.held_usd,
    max_open_batches: row.max_open_batches,
    rate_limit_per_minute: row.account_rate_limit_per_minute,
    created_at: row.account_created_at,
  })
  return { key: rowToKey(row), account }
}
