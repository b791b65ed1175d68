/** Admin API objects. */
import type { FineTuneRecord } from '../catalog/fine-tunes.ts'
import type { KeyRecord } from '../domain.ts'
import { availableUsd, usd } from '../money/decimal.ts'
import type { AdminAccountView } from '../accounts/accounts.ts'
import type { AccountObject, FineTuneObject, ApiKeyObject } from '../schemas/admin-objects.ts'
import { renderFineTuneModel } from './render-model.ts'

export function renderAccount(account: AdminAccountView): AccountObject {
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
    max_files: account.files.maxFiles,
    max_stored_bytes: account.files.maxStoredBytes,
    files_in_use: account.files.filesInUse,
    stored_bytes: account.files.storedBytes,
    daily_spend_limit_usd: account.daily.limitUsd,
    daily_spend_used_usd: usd(account.daily.usedUsd),
    created_at: account.createdAt,
  }
}

export function renderKey(key: KeyRecord): ApiKeyObject {
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

/** A model object (OpenAI's `id`, `object`, `created`, `owned_by`) with what the operator set. */
export function renderFineTune(fineTune: FineTuneRecord): FineTuneObject {
  return {
    ...renderFineTuneModel(fineTune),
    account_id: fineTune.accountId,
    name: fineTune.name,
    rank: fineTune.rank,
    size_mib: fineTune.sizeMib,
    source: fineTune.source,
    created_at: fineTune.createdAt,
    deactivated_at: fineTune.deactivatedAt,
  }
}
