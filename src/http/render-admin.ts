/** Admin API objects. */
import type { KeyRecord } from '../domain.ts'
import { availableUsd, usd } from '../money/decimal.ts'
import type { AccountView } from '../store/store.ts'

export function renderAccount(account: AccountView) {
  const available = availableUsd(account)
  return {
    id: account.id,
    object: 'account',
    name: account.name,
    balance_usd: usd(account.balanceUsd),
    held_usd: usd(account.heldUsd),
    available_usd: usd(available),
    open_batches: account.openBatches,
    max_open_batches: account.maxOpenBatches,
    rate_limit_per_minute: account.rateLimitPerMinute,
    created_at: account.createdAt,
  }
}

export function renderKey(key: KeyRecord) {
  return {
    id: key.id,
    object: 'api_key',
    account_id: key.accountId,
    name: key.name,
    prefix: key.prefix,
    scopes: key.scopes,
    rate_limit_per_minute: key.rateLimitPerMinute,
    created_at: key.createdAt,
    revoked_at: key.revokedAt,
  }
}
