/**
 * Accounts and API keys on bun:sqlite. What an account holds is its batches' holds (the
 * held_usd column) and its unexpired live leases, read together by accountView.
 */
import { OPEN_BATCH_STATUSES } from '../../domain.ts'
import { Money, moneyText, ZERO } from '../../money/decimal.ts'
import { sqliteQuery as q, type SqliteConnection } from '../connection.ts'
import { leasedUsd } from '../credit/sqlite-leases.ts'
import { sqlWordList } from '../sqlite/sql-word-list.ts'
import { rowToAccount, rowToKey } from './account-rows.ts'
import type {
  AccountStore,
  AccountView,
  NewAccount,
  NewKey,
  SessionStore,
} from './account-store.ts'
import * as sessions from './sqlite-sessions.ts'

const OPEN = sqlWordList(OPEN_BATCH_STATUSES)

/** The account with what it holds now and its open batches; null for a missing one. */
export function accountView(db: SqliteConnection, id: string): AccountView | null {
  const row = q(
    db,
    `SELECT a.*, (SELECT count(*) FROM batches b WHERE b.account_id = a.id AND b.status IN ${OPEN})
       AS open_batches FROM accounts a WHERE a.id = ?`,
  ).get(id)
  if (!row) return null
  // Live leases are holds too: held_usd shows them, so available_usd is what may still be spent.
  const account = rowToAccount(row)
  const held = new Money(account.heldUsd).plus(leasedUsd(db, id, Date.now()))
  return { ...account, heldUsd: moneyText(held), openBatches: Number(row.open_batches) }
}

/** The account and session store on bun:sqlite. */
export function createSqliteAccountStore(db: SqliteConnection): AccountStore & SessionStore {
  const tx = <T>(fn: () => T): T => db.transaction(fn).immediate()
  return {
    async createAccount(account: NewAccount) {
      q(
        db,
        `INSERT INTO accounts (id, name, balance_usd, held_usd, max_open_batches, rate_limit_per_minute, created_at)
         VALUES (?, ?, ?, '0', ?, ?, ?)`,
      ).run(
        account.id,
        account.name,
        moneyText(account.creditUsd),
        account.maxOpenBatches,
        account.rateLimitPerMinute,
        account.createdAt,
      )
      return accountView(db, account.id)!
    },
    async getAccount(id) {
      return accountView(db, id)
    },
    async hasAccounts() {
      return q(db, 'SELECT 1 FROM accounts LIMIT 1').get() != null
    },
    async setAccountLimits(id, { maxOpenBatches, rateLimitPerMinute }) {
      const changed = q(
        db,
        `UPDATE accounts SET max_open_batches = coalesce(?, max_open_batches),
           rate_limit_per_minute = coalesce(?, rate_limit_per_minute) WHERE id = ?`,
      ).run(maxOpenBatches ?? null, rateLimitPerMinute ?? null, id)
      return changed.changes > 0
    },
    async listAccountIds({ after, limit }) {
      const rows = q(
        db,
        'SELECT id FROM accounts WHERE (? IS NULL OR id < ?) ORDER BY id DESC LIMIT ?',
      ).all(after, after, limit + 1)
      return { ids: rows.slice(0, limit).map((row) => row.id), hasMore: rows.length > limit }
    },
    async listKeys(accountId) {
      if (!q(db, 'SELECT 1 FROM accounts WHERE id = ?').get(accountId)) return null
      return q(db, 'SELECT * FROM api_keys WHERE account_id = ? ORDER BY id DESC')
        .all(accountId)
        .map(rowToKey)
    },
    async addCredit(id, amountUsd) {
      return tx(() => {
        const row = q(db, 'SELECT balance_usd FROM accounts WHERE id = ?').get(id)
        if (!row) return null
        const next = Money.max(ZERO, new Money(row.balance_usd).plus(amountUsd))
        q(db, 'UPDATE accounts SET balance_usd = ? WHERE id = ?').run(moneyText(next), id)
        return accountView(db, id)
      })
    },
    async createKey(key: NewKey) {
      if (!q(db, 'SELECT 1 FROM accounts WHERE id = ?').get(key.accountId)) return null
      q(
        db,
        `INSERT INTO api_keys (id, account_id, hash, prefix, name, scopes, rate_limit_per_minute, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        key.id,
        key.accountId,
        key.hash,
        key.prefix,
        key.name,
        key.scopes.join(','),
        key.rateLimitPerMinute,
        key.createdAt,
      )
      return rowToKey(q(db, 'SELECT * FROM api_keys WHERE id = ?').get(key.id)!)
    },
    async revokeKey(id, at) {
      tx(() => {
        q(db, 'UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?').run(at, id)
        sessions.deleteKeySessions(db, id)
      })
      const row = q(db, 'SELECT * FROM api_keys WHERE id = ?').get(id)
      return row ? rowToKey(row) : null
    },
    async findKey(hash) {
      const key = q(db, 'SELECT * FROM api_keys WHERE hash = ? AND revoked_at IS NULL').get(hash)
      if (!key) return null
      const account = q(db, 'SELECT * FROM accounts WHERE id = ?').get(key.account_id)!
      return { key: rowToKey(key), account: rowToAccount(account) }
    },
    async createSession(session) {
      sessions.createSession(db, session)
    },
    async findSession(hash, now) {
      return sessions.findSession(db, hash, now)
    },
    async deleteSession(hash) {
      sessions.deleteSession(db, hash)
    },
    async deleteExpiredSessions(now) {
      return sessions.deleteExpiredSessions(db, now)
    },
  }
}
