/** Fine-tuned adapters on bun:sqlite: a row per adapter, keyed by its `ft:` id. */
import type { Database } from 'bun:sqlite'
import { rowToAdapter } from '../rows.ts'
import type { CreateAdapterResult, NewAdapter } from '../store.ts'

type Row = Record<string, any>

const q = (db: Database, sql: string) => db.query<Row, any[]>(sql)

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
