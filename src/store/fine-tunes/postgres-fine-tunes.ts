/** Fine-tuned adapters on PostgreSQL: a row per adapter, keyed by its `ft:` id. */
import type { PostgresPool } from '../connection.ts'
import {
  rowToAdapter,
  type AdapterStore,
  type CreateAdapterResult,
  type NewAdapter,
} from './fine-tune-store.ts'

type Sql = PostgresPool

/** The fine-tune store on PostgreSQL. */
export function createPostgresFineTuneStore(sql: PostgresPool): AdapterStore {
  return {
    createAdapter: (adapter) => createAdapter(sql, adapter),
    getAdapter: (id) => getAdapter(sql, id),
    listAdapters: (accountId, options = {}) =>
      listAdapters(sql, accountId, options.activeOnly ?? false),
    deactivateAdapter: (id, at) => deactivateAdapter(sql, id, at),
  }
}

async function byId(sql: Sql, id: string) {
  const [row] = await sql`SELECT * FROM adapters WHERE id = ${id}`
  return row ? rowToAdapter(row) : null
}

/** One statement: the account check and the insert, a racing duplicate answered by the key. */
export async function createAdapter(sql: Sql, adapter: NewAdapter): Promise<CreateAdapterResult> {
  const [row] = await sql`
    INSERT INTO adapters (id, account_id, base_model, name, rank, size_mib, source, status, created_at)
    SELECT ${adapter.id}, a.id, ${adapter.baseModel}, ${adapter.name}, ${adapter.rank},
      ${adapter.sizeMib}, ${adapter.source}, 'active', ${adapter.createdAt}
    FROM accounts a WHERE a.id = ${adapter.accountId}
    ON CONFLICT (id) DO NOTHING
    RETURNING *`
  if (row) return { kind: 'created', adapter: rowToAdapter(row) }
  const existing = await byId(sql, adapter.id)
  return existing ? { kind: 'duplicate', adapter: existing } : { kind: 'no_account' }
}

export const getAdapter = byId

export async function listAdapters(sql: Sql, accountId: string, activeOnly: boolean) {
  const rows = await sql`
    SELECT * FROM adapters
    WHERE account_id = ${accountId} ${activeOnly ? sql`AND status = 'active'` : sql``}
    ORDER BY created_at, id`
  return rows.map(rowToAdapter)
}

export async function deactivateAdapter(sql: Sql, id: string, at: number) {
  const [row] = await sql`
    UPDATE adapters SET status = 'inactive', deactivated_at = coalesce(deactivated_at, ${at})
    WHERE id = ${id}
    RETURNING *`
  return row ? rowToAdapter(row) : null
}
