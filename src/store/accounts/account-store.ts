/**
 * Accounts, their API keys and their dashboard sessions (docs/operations.md): who may call, and
 * the account each call is made for. An account's view also shows what its batches and live
 * leases hold. One implementation a dialect (sqlite-accounts.ts with sqlite-sessions.ts,
 * postgres-accounts.ts with postgres-sessions.ts), one contract (test/store/accounts.test.ts).
 */
import type { AccountRecord, KeyRecord, Scope } from '../../domain.ts'

export interface NewAccount {
  id: string
  name: string
  creditUsd: string
  maxOpenBatches: number
  rateLimitPerMinute: number
  createdAt: number
}

export interface NewKey {
  id: string
  accountId: string
  hash: string
  prefix: string
  name: string | null
  scopes: Scope[]
  rateLimitPerMinute: number | null
  createdAt: number
}

export interface AccountView extends AccountRecord {
  openBatches: number
}

export interface AccountStore {
  createAccount(account: NewAccount): Promise<AccountView>
  getAccount(id: string): Promise<AccountView | null>
  /** Whether any account exists yet (a fresh install has none: start-up says how to make one). */
  hasAccounts(): Promise<boolean>
  /**
   * Account ids newest first (ids sort by creation), those older than `after` when given, at most
   * `limit`, and whether more follow: the admin API's list.
   */
  listAccountIds(page: {
    after: string | null
    limit: number
  }): Promise<{ ids: string[]; hasMore: boolean }>
  /** The account's keys, newest first, revoked ones too; null for a missing account. */
  listKeys(accountId: string): Promise<KeyRecord[] | null>
  /** Changes the open-batch limit and the requests-per-minute limit (undefined: left as is); false: no such account. */
  setAccountLimits(
    id: string,
    limits: { maxOpenBatches?: number; rateLimitPerMinute?: number },
  ): Promise<boolean>
  /** Adds (or with a negative amount, removes, never below zero) credit. */
  addCredit(id: string, amountUsd: string): Promise<AccountView | null>
  createKey(key: NewKey): Promise<KeyRecord | null>
  /** Also ends the key's dashboard sessions. */
  revokeKey(id: string, at: number): Promise<KeyRecord | null>
  /** The live (not revoked) key with this hash, and its account. */
  findKey(hash: string): Promise<{ key: KeyRecord; account: AccountRecord } | null>
}

export interface NewSession {
  /** SHA-256 of the cookie's id. */
  hash: string
  keyId: string
  createdAt: number
  expiresAt: number
}

/** Dashboard sign-ins, kept server-side so signing out (or revoking the key) ends them. */
export interface SessionStore {
  createSession(session: NewSession): Promise<void>
  /** The session's live key and its account; null when unknown, expired or its key revoked. */
  findSession(hash: string, now: number): Promise<{ key: KeyRecord; account: AccountRecord } | null>
  deleteSession(hash: string): Promise<void>
  /** Deletes sessions expired before `now`; returns how many. */
  deleteExpiredSessions(now: number): Promise<number>
}
