/** Dashboard sessions on PostgreSQL: a row per sign-in, keyed by the SHA-256 of its cookie. */
import type { PostgresPool } from '../connection.ts'
import { rowToCaller } from './account-rows.ts'
import { drawn } from '../credit/postgres-account-ledger.ts'
import type { NewSession } from './account-store.ts'

type Sql = PostgresPool

export async function createSession(sql: Sql, session: NewSession) {
  await sql`
    INSERT INTO dashboard_sessions (hash, key_id, created_at, expires_at)
    VALUES (${session.hash}, ${session.keyId}, ${session.createdAt}, ${session.expiresAt})`
}

/** One round trip: this runs on every dashboard page. */
export async function findSession(sql: Sql, hash: string, now: number) {
  const [row] = await sql`
    SELECT k.*, a.name AS account_name, a.balance_usd - ${drawn(sql)} AS balance_usd,
      a.held_usd - ${drawn(sql)} AS held_usd, a.max_open_batches,
      a.rate_limit_per_minute AS account_rate_limit_per_minute, a.created_at AS account_created_at
    FROM dashboard_sessions s
    JOIN api_keys k ON k.id = s.key_id
    JOIN accounts a ON a.id = k.account_id
    WHERE s.hash = ${hash} AND s.expires_at > ${Math.floor(now)} AND k.revoked_at IS NULL`
  return row ? rowToCaller(row) : null
}

export async function deleteSession(sql: Sql, hash: string) {
  await sql`DELETE FROM dashboard_sessions WHERE hash = ${hash}`
}

export async function deleteExpiredSessions(sql: Sql, now: number): Promise<number> {
  const result = await sql`DELETE FROM dashboard_sessions WHERE expires_at <= ${Math.floor(now)}`
  return result.count
}
