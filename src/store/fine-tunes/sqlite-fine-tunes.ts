/** Fine-tunes on bun:sqlite: a row per fine-tune, keyed by its `ft:` id. */
import { sqliteQuery as q, type SqliteConnection } from '../connection.ts'
import {
  rowToFineTune,
  type FineTuneStore,
  type CreateFineTuneResult,
  type NewFineTune,
} from './fine-tune-store.ts'

type Database = SqliteConnection

/** The fine-tune store on bun:sqlite. */
export function createSqliteFineTuneStore(db: SqliteConnection): FineTuneStore {
  return {
    async createFineTune(fineTune) {
      return db.transaction(() => createFineTune(db, fineTune)).immediate()
    },
    async getFineTune(id) {
      return getFineTune(db, id)
    },
    async listFineTunes(accountId, options = {}) {
      return listFineTunes(db, accountId, options.activeOnly ?? false)
    },
    async deactivateFineTune(id, at) {
      return deactivateFineTune(db, id, at)
    },
  }
}

const byId = (db: Database, id: string) => {
  const row = q(db, 'SELECT * FROM adapters WHERE id = ?').get(id)
  return row ? rowToFineTune(row) : null
}

/** Runs inside the caller's transaction: the account check and the insert together. */
export function createFineTune(db: Database, fineTune: NewFineTune): CreateFineTuneResult {
  if (!q(db, 'SELECT 1 FROM accounts WHERE id = ?').get(fineTune.accountId))
    return { kind: 'no_account' }
  const existing = byId(db, fineTune.id)
  if (existing) return { kind: 'duplicate', fineTune: existing }
  q(
    db,
    `INSERT INTO adapters (id, account_id, base_model, name, rank, size_mib, source, status, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, 'active', ?)`,
  ).run(
    fineTune.id,
    fineTune.accountId,
    fineTune.baseModel,
    fineTune.name,
    fineTune.rank,
    fineTune.sizeMib,
    fineTune.source,
    fineTune.createdAt,
  )
  return { kind: 'created', fineTune: byId(db, fineTune.id)! }
}

export const getFineTune = byId

export function listFineTunes(db: Database, accountId: string, activeOnly: boolean) {
  const rows = q(
    db,
    `SELECT * FROM adapters WHERE account_id = ? ${activeOnly ? "AND status = 'active'" : ''}
     ORDER BY created_at, id`,
  ).all(accountId)
  return rows.map(rowToFineTune)
}

export function deactivateFineTune(db: Database, id: string, at: number) {
  q(
    db,
    `UPDATE adapters SET status = 'inactive', deactivated_at = coalesce(deactivated_at, ?)
     WHERE id = ?`,
  ).run(at, id)
  return byId(db, id)
}
