/** Account and key operations, shared by the admin API and the CLI. */
import { generateKey } from '../auth/keys.ts'
import { newId, nowSeconds, type KeyRecord, type Scope } from '../domain.ts'
import { Money, moneyText } from '../money/decimal.ts'
import type {
  AccountStore,
  AccountView,
  DailySpend,
  DailySpendStore,
  FileLimits,
  FileQuotaDefaults,
  UploadStore,
} from '../store/store.ts'

/**
 * An account as the operator sees it: with its file limits in force and what its files use, and
 * its daily spend limit (null: none) with what today has used of it.
 */
export interface AdminAccountView extends AccountView {
  files: { maxFiles: number; maxStoredBytes: number; filesInUse: number; storedBytes: number }
  daily: DailySpend
}

/** Account settings to change; undefined leaves one as it is. */
export interface AccountSettings extends FileLimits {
  /** Decimal string; null: no daily limit. */
  dailySpendLimitUsd?: string | null
  maxOpenBatches?: number
  rateLimitPerMinute?: number
}

export interface NewAccountInput extends AccountSettings {
  name: string
  creditUsd: string
}

export interface Accounts {
  createAccount(input: NewAccountInput): Promise<AdminAccountView>
  getAccount(id: string): Promise<AdminAccountView | null>
  updateAccount(id: string, settings: AccountSettings): Promise<AdminAccountView | null>
  addCredit(id: string, amountUsd: string): Promise<AdminAccountView | null>
  /** The key's secret is returned here once and never stored. */
  createKey(
    accountId: string,
    input: { name: string | null; scopes: Scope[]; rateLimitPerMinute: number | null },
  ): Promise<{ key: string; record: KeyRecord } | null>
  revokeKey(id: string): Promise<KeyRecord | null>
  /** Newest first, older than `after` when given (the admin list). */
  listAccounts(page: {
    after: string | null
    limit: number
  }): Promise<{ accounts: AdminAccountView[]; hasMore: boolean }>
  /** Newest first, revoked ones too; null for a missing account. */
  listKeys(accountId: string): Promise<KeyRecord[] | null>
}

export function createAccounts(
  store: AccountStore & DailySpendStore & UploadStore,
  defaults: { maxOpenBatches: number; rateLimitPerMinute: number } & FileQuotaDefaults,
  /**
   * `onKeyRevoked`: e.g. the gateway's key cache, so the instance that revoked a key refuses it at
   * once. `onDeposit`: credit was added, so batches waiting for it may start now (docs/open-models.md).
   */
  hooks: {
    onKeyRevoked?: (id: string) => void
    onDeposit?: (accountId: string) => void
    /** Unix ms: the day whose use the account shows. */
    now?: () => number
  } = {},
): Accounts {
  async function withFiles(account: AccountView | null): Promise<AdminAccountView | null> {
    if (!account) return null
    const quota = await store.getFileQuota(account.id)
    const daily = (await store.getDailySpend(account.id, (hooks.now ?? Date.now)())) ?? {
      limitUsd: null,
      usedUsd: '0',
    }
    return {
      ...account,
      daily,
      files: {
        maxFiles: quota?.maxFiles ?? defaults.maxFiles,
        maxStoredBytes: quota?.maxStoredBytes ?? defaults.maxStoredBytes,
        filesInUse: quota?.filesInUse ?? 0,
        storedBytes: quota?.storedBytes ?? 0,
      },
    }
  }
  return {
    async createAccount(input) {
      const id = newId('acct_')
      await store.createAccount({
        id,
        name: input.name,
        creditUsd: moneyText(input.creditUsd),
        maxOpenBatches: input.maxOpenBatches ?? defaults.maxOpenBatches,
        rateLimitPerMinute: input.rateLimitPerMinute ?? defaults.rateLimitPerMinute,
        createdAt: nowSeconds(),
      })
      if (input.dailySpendLimitUsd != null)
        await store.setDailySpendLimit(id, moneyText(input.dailySpendLimitUsd))
      if (input.maxFiles !== undefined || input.maxStoredBytes !== undefined) {
        await store.setFileQuota(id, {
          maxFiles: input.maxFiles,
          maxStoredBytes: input.maxStoredBytes,
        })
      }
      return (await withFiles(await store.getAccount(id)))!
    },
    getAccount: async (id) => withFiles(await store.getAccount(id)),
    async updateAccount(id, settings) {
      if (!(await store.setFileQuota(id, settings))) return null
      if (settings.maxOpenBatches !== undefined || settings.rateLimitPerMinute !== undefined)
        await store.setAccountLimits(id, settings)
      if (settings.dailySpendLimitUsd !== undefined) {
        const limit = settings.dailySpendLimitUsd
        await store.setDailySpendLimit(id, limit === null ? null : moneyText(limit))
      }
      return withFiles(await store.getAccount(id))
    },
    async addCredit(id, amount) {
      const account = await store.addCredit(id, moneyText(amount))
      if (account && new Money(amount).greaterThan(0)) hooks.onDeposit?.(id)
      return withFiles(account)
    },
    async createKey(accountId, input) {
      const secret = generateKey()
      const record = await store.createKey({
        id: newId('key_'),
        accountId,
        hash: secret.hash,
        prefix: secret.prefix,
        name: input.name,
        scopes: input.scopes,
        rateLimitPerMinute: input.rateLimitPerMinute,
        createdAt: nowSeconds(),
      })
      return record ? { key: secret.key, record } : null
    },
    async revokeKey(id) {
      const revoked = await store.revokeKey(id, nowSeconds())
      hooks.onKeyRevoked?.(id)
      return revoked
    },
    async listAccounts(page) {
      const { ids, hasMore } = await store.listAccountIds(page)
      const accounts: AdminAccountView[] = []
      // One at a time: a page is at most 100, and each view is the same reads as a GET.
      for (const id of ids) {
        const account = await withFiles(await store.getAccount(id))
        if (account) accounts.push(account)
      }
      return { accounts, hasMore }
    },
    listKeys: (accountId) => store.listKeys(accountId),
  }
}
