/** Dashboard sessions on bun:sqlite: a row per sign-in, keyed by the SHA-256 of its cookie. */
import { sqliteQuery as q, type SqliteConnection } from '../connection.ts'
import { rowToAccount, rowToKey } from './account-rows.ts'
import type { NewSession } from './account-store.ts'

type Database = SqliteConnection

export function createSession(db: Database, session: NewSession) {
  q(
    db,
    'INSERT INTO dashboard_sessions (hash, key_id, created_at, expires_at) VALUES (?, ?, ?, ?)',
  ).run(session.hash, session.keyId, session.createdAt, session.expiresAt)
}

export function findSession(db: Database, hash: string, now: number) {
  const key = q(
    db,
    `SELECT k.* FROM dashboard_sessions s JOIN api_keys k ON k.id = s.key_id
     WHERE s.hash = ? AND s.expires_at > ? AND k.revoked_at IS NULL`,
  ).get(hash, now)
  if (!key) return null
  const account = q(db, 'SELECT * FROM accounts WHERE id = ?').get(key.account_id)!
  return { key: rowToKey(key), account: rowToAccount(account) }
}

export function deleteSession(db: Database, hash: string) {
  q(db, 'DELETE FROM dashboard_sessions WHERE hash = ?').run(hash)
}

export function deleteKeySessions(db: Database, keyId: string) {
  q(db, 'DELETE FROM dashboard_sessions WHERE key_id = ?').run(keyId)
}

export function deleteExpiredSessions(db: Database, now: number): number {
  return q(db, 'DELETE FROM dashboard_sessions WHERE expires_at <= ?').run(now).changes
}
