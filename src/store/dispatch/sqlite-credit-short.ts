/**
 * Running batches of an account whose balance is below its holds, on the embedded store: they say
 * `insufficient_credit` while it is short and stop saying it once a deposit covers the holds
 * (credit-waiting.ts). Part of the maintenance pass, inside its transaction.
 */
import { sqliteQuery as q, type SqliteConnection as Database } from '../connection.ts'
import { CREDIT_REPLACES, creditWaitChange, type CreditWaitRow } from './credit-waiting.ts'
import { currentCount } from './sqlite-batch-progress.ts'
import { writeWaiting } from './sqlite-waiting.ts'

const PENDING = currentCount('pending')

/** Sets or clears the reason where it changed; returns the batches it wrote. */
export function noteCreditWaits(db: Database): string[] {
  // Money is decimal TEXT: SQL picks the accounts that may be short, comparing as REAL with a
  // margin far above REAL's rounding (it never leaves out one that is short), and
  // creditWaitChange decides exactly.
  const rows = q(
    db,
    `SELECT b.id, b.waiting_code, b.waiting_message, ${PENDING} AS pending, a.balance_usd,
       a.held_usd
     FROM batches b JOIN accounts a ON a.id = b.account_id
     WHERE b.status = 'in_progress' AND (b.waiting_code = 'insufficient_credit' OR (${PENDING} > 0
       AND CAST(a.balance_usd AS REAL) < CAST(a.held_usd AS REAL) * (1 + 1e-9) + 1e-9))`,
  ).all() as (CreditWaitRow & { id: string })[]
  const written: string[] = []
  for (const row of rows) {
    const waiting = creditWaitChange(row)
    if (waiting === undefined) continue
    const replaces = waiting ? CREDIT_REPLACES : (['insufficient_credit'] as const)
    if (writeWaiting(db, { batchId: row.id, waiting, replaces })) written.push(row.id)
  }
  return written
}
