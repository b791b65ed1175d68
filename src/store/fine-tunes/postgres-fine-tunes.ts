/** Fine-tunes on PostgreSQL: a row per fine-tune, keyed by its `ft:` id. */
import type { PostgresPool } from '../connection.ts'
import {
  rowToFineTune,
  type FineTuneStore,
  type CreateFineTuneResult,
  type NewFineTune,
} from './fine-tune-store.ts'

type Sql = PostgresPool

/** The fine-tune store on PostgreSQL. */
export function createPostgresFineTuneStore(sql: PostgresPool): FineTuneStore {
  return {
    createFineTune: (fineTune) => createFineTune(sql, fineTune),
    getFineTune: (id) => getFineTune(sql, id),
    listFineTunes: (accountId, options = {}) =>
      listFineTunes(sql, accountId, options.activeOnly ?? false),
    deactivateFineTune: (id, at) => deactivateFineTune(sql, id, at),
  }
}

async function byId(sql: Sql, id: string) {
  const [row] = await sql`SELECT * FROM adapters WHERE id = ${id}`
  return row ? rowToFineTune(row) : null
}

/** One statement: the account check and the insert, a racing duplicate answered by the key. */
export async function createFineTune(
  sql: Sql,
  fineTune: NewFineTune,
): Promise<CreateFineTuneResult> {
  const [row] = await sql`
    INSERT INTO adapters (id, account_id, base_model, name, rank, size_mib, source, status, created_at)
    SELECT ${fineTune.id}, a.id, ${fineTune.baseModel}, ${fineTune.name}, ${fineTune.rank},
      ${fineTune.sizeMib}, ${fineTune.source}, 'active', ${fineTune.createdAt}
    FROM accounts a WHERE a.id = ${fineTune.accountId}
    ON CONFLICT (id) DO NOTHING
    RETURNING *`
  if (row) return { kind: 'created', fineTune: rowToFineTune(row) }
  const existing = await byId(sql, fineTune.id)
  return existing ? { kind: 'duplicate', fineTune: existing } : { kind: 'no_account' }
}

export const getFineTune = byId

export async function listFineTunes(sql: Sql, accountId: string, activeOnly: boolean) {
  const rows = await sql`
    SELECT * FROM adapters
    WHERE account_id = ${accountId} ${activeOnly ? sql`AND status = 'active'` : sql``}
    ORDER BY created_at, id`
  return rows.map(rowToFineTune)
}

export async function deactivateFineTune(sql: Sql, id: string, at: number) {
  const [row] = await sql`
    UPDATE adapters SET status = 'inactive', deactivated_at = coalesce(deactivated_at, ${at})
    WHERE id = ${id}
    RETURNING *`
  return row ? rowToFineTune(row) : null
}
