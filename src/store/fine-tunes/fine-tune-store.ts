/**
 * Fine-tunes (docs/open-models.md): LoRA adapters an operator registers for an account, named by
 * lines in `body.model`. One implementation a dialect (sqlite-fine-tunes.ts,
 * postgres-fine-tunes.ts), one contract (test/store/fine-tunes.test.ts).
 */
import type { AdapterRecord, AdapterStatus } from '../../catalog/adapters.ts'
import { num, type Row } from '../connection.ts'

/** A fine-tuned adapter to register (docs/open-models.md); it starts active. */
export type NewAdapter = Omit<AdapterRecord, 'status' | 'deactivatedAt'>

export type CreateAdapterResult =
  | { kind: 'created'; adapter: AdapterRecord }
  /** An adapter with this id exists already (active or not). */
  | { kind: 'duplicate'; adapter: AdapterRecord }
  | { kind: 'no_account' }

/** Accounts' fine-tuned adapters: registered by the operator, named by lines in `body.model`. */
export interface AdapterStore {
  createAdapter(adapter: NewAdapter): Promise<CreateAdapterResult>
  /** Any account's, active or not; null when there is none with this id. */
  getAdapter(id: string): Promise<AdapterRecord | null>
  /** The account's adapters, oldest first; only the active ones with `activeOnly`. */
  listAdapters(accountId: string, options?: { activeOnly?: boolean }): Promise<AdapterRecord[]>
  /** Marks it inactive (the first deactivation's time is kept); null when there is none. */
  deactivateAdapter(id: string, at: number): Promise<AdapterRecord | null>
}

/** A row of either dialect → a record. */
export function rowToAdapter(row: Row): AdapterRecord {
  return {
    id: row.id as string,
    accountId: row.account_id as string,
    baseModel: row.base_model as string,
    name: row.name as string,
    rank: Number(row.rank),
    sizeMib: Number(row.size_mib),
    source: row.source as string,
    status: row.status as AdapterStatus,
    createdAt: Number(row.created_at),
    deactivatedAt: num(row.deactivated_at),
  }
}
