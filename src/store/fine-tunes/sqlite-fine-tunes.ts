/** Fine-tuned adapters on bun:sqlite: a row per adapter, keyed by its `ft:` id. */
import { sqliteQuery as q, type SqliteConnection } from '../connection.ts'
import {
  rowToAdapter,
  type AdapterStore,
  type CreateAdapterResult,
  type NewAdapter,
} from './fine-tune-store.ts'

type Database = SqliteConnection

/** The fine-tune store on bun:sqlite. */
export function createSqliteFineTuneStore(db: SqliteConnection): AdapterStore {
  return {
    async createAdapter(adapter) {
      return db.transaction(() => createAdapter(db, adapter)).immediate()
    },
    async getAdapter(id) {
      return getAdapter(db, id)
    },
    async listAdapters(accountId, options = {}) {
      return listAdapters(db, accountId, options.activeOnly ?? false)
    },
    async deactivateAdapter(id, at) {
      return deactivateAdapter(db, id, at)
    },
  }
}

const byId = (db: Database, id: string) => {
  const row = q(db, 'SELECT * FROM adapters WHERE id = ?').get(id)
  return row ? rowToAdapter(row) : null
}

/** Runs inside the caller's transaction: the account check and the insert together. */
export function createAdapter(db: Database, adapter: NewAdapter): CreateAdapterResult {
  if (!q(db, 'SELECT 1 FROM accounts WHERE id = ?').get(adapter.accountId))
    return { kind: 'no_account' }
  const existing = byId(db, adapter.id)
  if (existing) return { kind: 'duplicate', adapter: existing }
  q(
    db,
    `INSERT INTO adapters (id, account_id, base_model, name, rank, size_mib, source, status, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?)`,
  ).run(
    adapter.id,
    adapter.accountId,
    adapter.baseModel,
    adapter.name,
    adapter.rank,
    adapter.sizeMib,
    adapter.source,
    adapter.createdAt,
  )
  return { kind: 'created', adapter: byId(db, adapter.id)! }
}

export const getAdapter = byId

export function listAdapters(db: Database, accountId: string, activeOnly: boolean) {
  const rows = q(
    db,
    `SELECT * FROM adapters WHERE account_id = ? ${activeOnly ? "AND status = 'active'" : ''}
     ORDER BY created_at, id`,
  ).all(accountId)
  return rows.map(rowToAdapter)
}

export function deactivateAdapter(db: Database, id: string, at: number) {
  q(
    db,
    `UPDATE adapters SET status = 'inactive', deactivated_at = coalesce(deactivated_at, ?)
     WHERE id = ?`,
  ).run(at, id)
  return byId(db, id)
}
