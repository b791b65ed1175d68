/** Why an open batch waits, on the embedded store: set and cleared by the parts that know. */
import { OPEN_BATCH_STATUSES, WAITING_CODES } from '../../domain.ts'
import type { WaitingChange } from './dispatch-store.ts'
import { sqliteQuery as q, type SqliteConnection as Database } from '../connection.ts'

const OPEN = `(${OPEN_BATCH_STATUSES.map((status) => `'${status}'`).join(', ')})`

export async function setWaiting(db: Database, change: WaitingChange) {
  return writeWaiting(db, change)
}

/** setWaiting inside the caller's transaction: whether it changed anything. */
export function writeWaiting(
  db: Database,
  { batchId, waiting, replaces = WAITING_CODES }: WaitingChange,
): boolean {
  const code = waiting?.code ?? null
  const message = waiting?.message ?? null
  const until = waiting?.until ?? null
  const codes = replaces.map(() => '?').join(', ')
  return (
    q(
      db,
      `UPDATE batches SET waiting_code = ?, waiting_message = ?, waiting_until = ?
       WHERE id = ? AND status IN ${OPEN}
         AND (waiting_code IS NULL OR waiting_code IN (${codes || "''"}))
         AND (waiting_code IS NOT ? OR waiting_message IS NOT ? OR waiting_until IS NOT ?)`,
    ).run(code, message, until, batchId, ...replaces, code, message, until).changes > 0
  )
}
