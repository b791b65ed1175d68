/** Account and key operations, shared by the admin API and the CLI. */
import { generateKey } from '../auth/keys.ts'
import { newId, nowSeconds, type KeyRecord, type Scope } from '../domain.ts'
import { moneyText } from '../money/decimal.ts'
import type { AccountStore, AccountView } from '../store/store.ts'

export interface Accounts {
  createAccount(input: { name: string; creditUsd: string; maxOpenBatches?: number; rateLimitPerMinute?: number }): Promise<AccountView>
  getAccount(id: string): Promise<AccountView | null>
  addCredit(id: string, amountUsd: string): Promise<AccountView | null>
  /** The key's secret is returned here once and never stored. */
  createKey(accountId: string, input: { name: string | null; scopes: Scope[]; rateLimitPerMinute: number | null }): Promise<{ key: string; record: KeyRecord } | null>
  revokeKey(id: string): Promise<KeyRecord | null>
}

/** `onKeyRevoked`: e.g. the gateway's key cache, so the instance that revoked a key refuses it at once. */
export function createAccounts(store: AccountStore, defaults: { maxOpenBatches: number; rateLimitPerMinute: number }, hooks: { onKeyRevoked?: (id: string) => void } = {}): Accounts {
  return {
    createAccount: (input) =>
      store.createAccount({
        id: newId('acct_'),
        name: input.name,
        creditUsd: moneyText(input.creditUsd),
        maxOpenBatches: input.maxOpenBatches ?? defaults.maxOpenBatches,
        rateLimitPerMinute: input.rateLimitPerMinute ?? defaults.rateLimitPerMinute,
        createdAt: nowSeconds(),
      }),
    getAccount: (id) => store.getAccount(id),
    addCredit: (id, amount) => store.addCredit(id, moneyText(amount)),
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
