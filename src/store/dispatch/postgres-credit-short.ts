/**
 * Running batches of an account whose balance is below its holds, on PostgreSQL: they say
 * `insufficient_credit` while it is short and stop saying it once a deposit covers the holds
 * (credit-waiting.ts). Part of the maintenance pass, inside its transaction; rows another
 * instance is advancing are skipped, not waited for, and seen on a later pass.
 */
import type postgres from 'postgres'
import { drawn } from '../credit/postgres-account-ledger.ts'
import { creditWaitChange } from './credit-waiting.ts'
import { current, progressJoin } from './postgres-batch-progress.ts'

/** Sets or clears the reason where it changed; returns the batches it wrote. */
export async function noteCreditWaits(tx: postgres.TransactionSql): Promise<string[]> {
  // balance − held is the account row's alone (postgres-account-ledger.ts), so SQL finds the
  // short accounts exactly; the figures the message gives take the ledger's shards off both.
  const rows = await tx`
    SELECT b.id, b.waiting_code, b.waiting_message, ${current(tx, 'pending')} AS pending,
      a.balance_usd - ${drawn(tx)} AS balance_usd, a.held_usd - ${drawn(tx)} AS held_usd
    FROM batches b JOIN accounts a ON a.id = b.account_id ${progressJoin(tx)}
    WHERE b.status = 'in_progress' AND (b.waiting_code = 'insufficient_credit'
      OR (a.balance_usd < a.held_usd AND ${current(tx, 'pending')} > 0))
    ORDER BY b.id FOR UPDATE OF b SKIP LOCKED`
  const updates = rows.flatMap((row) => {
    const waiting = creditWaitChange({
      pending: Number(row.pending),
      balance_usd: String(row.balance_usd),
      held_usd: String(row.held_usd),
      waiting_code: row.waiting_code,
      waiting_message: row.waiting_message,
    })
    if (waiting === undefined) return []
    return [
      { id: row.id as string, code: waiting?.code ?? null, message: waiting?.message ?? null },
    ]
  })
  if (updates.length === 0) return []
  // The rows are locked: what was read is what each says now.
  await tx`
    UPDATE batches b SET waiting_code = t.code, waiting_message = t.message, waiting_until = NULL
    FROM jsonb_to_recordset(${tx.json(updates)}) AS t (id text, code text, message text)
    WHERE b.id = t.id`
  return updates.map((update) => update.id)
}
