/** Account and key operations, shared by the admin API and the CLI. */
import { generateKey } from '../auth/keys.ts'
import { newId, nowSeconds, type KeyRecord, type Scope } from '../domain.ts'
import { moneyText } from '../money/decimal.ts'
import type {
  AccountStore,
  AccountView,
  FileLimits,
  FileQuotaDefaults,
  UploadStore,
} from '../store/store.ts'

/** An account as the operator sees it: with its file limits in force and what its files use. */
export interface AdminAccountView extends AccountView {
  files: { maxFiles: number; maxStoredBytes: number; filesInUse: number; storedBytes: number }
}

export interface NewAccountInput extends FileLimits {
  name: string
  creditUsd: string
  maxOpenBatches?: number
  rateLimitPerMinute?: number
}

export interface Accounts {
  createAccount(input: NewAccountInput): Promise<AdminAccountView>
  getAccount(id: string): Promise<AdminAccountView | null>
  updateAccount(id: string, settings: FileLimits): Promise<AdminAccountView | null>
  addCredit(id: string, amountUsd: string): Promise<AdminAccountView | null>
  /** The key's secret is returned here once and never stored. */
  createKey(
    accountId: string,
    input: { name: string | null; scopes: Scope[]; rateLimitPerMinute: number | null },
  ): Promise<{ key: string; record: KeyRecord } | null>
  revokeKey(id: string): Promise<KeyRecord | null>
}

export function createAccounts(
  store: AccountStore & UploadStore,
  defaults: { maxOpenBatches: number; rateLimitPerMinute: number } & FileQuotaDefaults,
  /** `onKeyRevoked`: e.g. the gateway's key cache, so the instance that revoked a key refuses it at once. */
  hooks: { onKeyRevoked?: (id: string) => void } = {},
): Accounts {
  async function withFiles(account: AccountView | null): Promise<AdminAccountView | null> {
    if (!account) return null
    const quota = await store.getFileQuota(account.id)
    return {
      ...account,
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
      return withFiles(await store.getAccount(id))
    },
    addCredit: async (id, amount) => withFiles(await store.addCredit(id, moneyText(amount))),
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
  }
}
