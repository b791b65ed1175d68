/**
 * Fine-tunes (docs/open-models.md): LoRA fine-tunes an operator registers for an account, named by
 * lines in `body.model`. One implementation a dialect (sqlite-fine-tunes.ts,
 * postgres-fine-tunes.ts), one contract (test/store/fine-tunes.test.ts).
 */
import type { FineTuneRecord, FineTuneStatus } from '../../catalog/fine-tunes.ts'
import { num, type Row } from '../connection.ts'

/** A fine-tune to register (docs/open-models.md); it starts active. */
export type NewFineTune = Omit<FineTuneRecord, 'status' | 'deactivatedAt'>

export type CreateFineTuneResult =
  | { kind: 'created'; fineTune: FineTuneRecord }
  /** A fine-tune with this id exists already (active or not). */
  | { kind: 'duplicate'; fineTune: FineTuneRecord }
  | { kind: 'no_account' }

/** Accounts' fine-tunes: registered by the operator, named by lines in `body.model`. */
export interface FineTuneStore {
  createFineTune(fineTune: NewFineTune): Promise<CreateFineTuneResult>
  /** Any account's, active or not; null when there is none with this id. */
  getFineTune(id: string): Promise<FineTuneRecord | null>
  /** The account's fine-tunes, oldest first; only the active ones with `activeOnly`. */
  listFineTunes(accountId: string, options?: { activeOnly?: boolean }): Promise<FineTuneRecord[]>
  /** Marks it inactive (the first deactivation's time is kept); null when there is none. */
  deactivateFineTune(id: string, at: number): Promise<FineTuneRecord | null>
}

/** A row of either dialect → a record. */
export function rowToFineTune(row: Row): FineTuneRecord {
  return {
    id: row.id as string,
    accountId: row.account_id as string,
    baseModel: row.base_model as string,
    name: row.name as string,
    rank: Number(row.rank),
    sizeMib: Number(row.size_mib),
    source: row.source as string,
    status: row.status as FineTuneStatus,
    createdAt: Number(row.created_at),
    deactivatedAt: num(row.deactivated_at),
  }
}
