/**
 * Accounts and API keys on PostgreSQL. What an account holds is its batches' holds (the
 * held_usd column) and its unexpired live leases on every instance, read together by accountView.
 */
import { OPEN_BATCH_STATUSES } from '../../domain.ts'
import { moneyText } from '../../money/decimal.ts'
import type { PostgresPool, PostgresQueries } from '../connection.ts'
import { rowToAccount, rowToCaller, rowToKey } from './account-rows.ts'
import type { AccountStore, AccountView, SessionStore } from './account-store.ts'
import { drawn } from '../credit/postgres-account-ledger.ts'
import * as sessions from './postgres-sessions.ts'

const OPEN_STATUSES = [...OPEN_BATCH_STATUSES]

/** The account with what it holds now and its open batches; null for a missing one. */
export async function accountView(db: PostgresQueries, id: string): Promise<AccountView | null> {
  // Live leases are holds too: held_usd shows them, so available_usd is what may still be spent.
  const [row] = await db`
    SELECT a.id, a.name, a.balance_usd - ${drawn(db)} AS balance_usd, a.max_open_batches,
      a.rate_limit_per_minute, a.created_at,
      a.held_usd - ${drawn(db)} + (SELECT coalesce(sum(l.amount_usd), 0) FROM credit_leases l
                    WHERE l.account_id = a.id AND l.expires_at_ms > ${Date.now()}) AS held_usd,
      (SELECT count(*) FROM batches b
       WHERE b.account_id = a.id AND b.status = ANY(${OPEN_STATUSES}::text[])) AS open_batches
    FROM accounts a WHERE a.id = ${id}`
  return row ? { ...rowToAccount(row), openBatches: Number(row.open_batches) } : null
}

/** The account and session store on PostgreSQL. */
export function createPostgresAccountStore(sql: PostgresPool): AccountStore & SessionStore {
  return {
    async createAccount(account) {
      await sql`
        INSERT INTO accounts (id, name, balance_usd, held_usd, max_open_batches,
          rate_limit_per_minute, created_at)
        VALUES (${account.id}, ${account.name}, ${moneyText(account.creditUsd)}::numeric, 0,
          ${account.maxOpenBatches}, ${account.rateLimitPerMinute}, ${account.createdAt})`
      return (await accountView(sql, account.id))!
    },
    getAccount: (id) => accountView(sql, id),
    async hasAccounts() {
      const rows = await sql`SELECT 1 FROM accounts LIMIT 1`
      return rows.length > 0
    },
    async setAccountLimits(id, { maxOpenBatches, rateLimitPerMinute }) {
      const rows = await sql`
        UPDATE accounts SET max_open_batches = coalesce(${maxOpenBatches ?? null}::int, max_open_batches),
          rate_limit_per_minute = coalesce(${rateLimitPerMinute ?? null}::int, rate_limit_per_minute)
        WHERE id = ${id} RETURNING id`
      return rows.length > 0
    },
    async listAccountIds({ after, limit }) {
      const rows = await sql`
        SELECT id FROM accounts WHERE ${after}::text IS NULL OR id < ${after}
        ORDER BY id DESC LIMIT ${limit + 1}`
      return { ids: rows.slice(0, limit).map((row) => row.id), hasMore: rows.length > limit }
    },
    async listKeys(accountId) {
      const [account] = await sql`SELECT 1 FROM accounts WHERE id = ${accountId}`
      if (!account) return null
      const rows =
        await sql`SELECT * FROM api_keys WHERE account_id = ${accountId} ORDER BY id DESC`
      return rows.map(rowToKey)
    },
    async addCredit(id, amountUsd) {
      // Locked FOR UPDATE, so no settlement moves the balance meanwhile (postgres-account-ledger.ts);
      // never below zero: the row's balance never below what its shards have drawn.
      const [row] = await sql.begin(async (tx) => {
        await tx`SELECT id FROM accounts WHERE id = ${id} FOR UPDATE`
        return tx`
          UPDATE accounts a
          SET balance_usd = GREATEST(${drawn(tx)}, a.balance_usd + ${moneyText(amountUsd)}::numeric)
          WHERE a.id = ${id} RETURNING a.id`
      })
      return row ? accountView(sql, id) : null
    },
    async createKey(key) {
      const [row] = await sql`
        INSERT INTO api_keys (id, account_id, hash, prefix, name, scopes, rate_limit_per_minute,
          created_at)
        SELECT ${key.id}, ${key.accountId}, ${key.hash}, ${key.prefix}, ${key.name},
          ${key.scopes.join(',')}, ${key.rateLimitPerMinute}::int, ${key.createdAt}
        WHERE EXISTS (SELECT 1 FROM accounts WHERE id = ${key.accountId})
        RETURNING *`
      return row ? rowToKey(row) : null
    },
    async revokeKey(id, at) {
      // The key's dashboard sessions end with it (they are refused anyway once it is revoked).
      // Times are bigint columns: "now" rounds down, so nothing happens sooner than asked.
      const [row] = await sql`
        WITH revoked AS (
          UPDATE api_keys SET revoked_at = coalesce(revoked_at, ${Math.floor(at)}) WHERE id = ${id}
          RETURNING *),
        ended AS (DELETE FROM dashboard_sessions WHERE key_id = ${id})
        SELECT * FROM revoked`
      return row ? rowToKey(row) : null
    },
    /** One round trip: this runs on every authenticated request. */
    async findKey(hash) {
      const [row] = await sql`
        SELECT k.*, a.name AS account_name, a.balance_usd - ${drawn(sql)} AS balance_usd,
          a.held_usd - ${drawn(sql)} AS held_usd, a.max_open_batches,
          a.rate_limit_per_minute AS account_rate_limit_per_minute,
          a.created_at AS account_created_at
        FROM api_keys k JOIN accounts a ON a.id = k.account_id
        WHERE k.hash = ${hash} AND k.revoked_at IS NULL`
      return row ? rowToCaller(row) : null
    },
    createSession: (session) => sessions.createSession(sql, session),
    findSession: (hash, now) => sessions.findSession(sql, hash, now),
    deleteSession: (hash) => sessions.deleteSession(sql, hash),
    deleteExpiredSessions: (now) => sessions.deleteExpiredSessions(sql, now),
  }
}
