/**
 * Ending a batch on the embedded store: the one path to a terminal status for a batch that ran
 * (the dispatcher's advance and a cancel both come here; a refused facade batch is stored failed).
 */
import { Money, moneyText, ZERO } from '../../money/decimal.ts'
import type { SqliteConnection as Database } from '../connection.ts'
import { enqueueWebhookEvents } from '../webhooks/sqlite-webhooks.ts'
import { terminalStatus } from './dispatch-rows.ts'
import { current, foldProgress } from './sqlite-batch-progress.ts'

type Row = Record<string, any>

/**
 * An ended batch waits for nothing, but a cap that stopped lines stays said: it is why they were
 * cancelled (docs/money-and-limits.md). Every other reason is cleared.
 */
export const KEEP_ENDED_WAITING = `waiting_code = CASE WHEN waiting_code = 'max_cost_reached' THEN waiting_code END,
  waiting_message = CASE WHEN waiting_code = 'max_cost_reached' THEN waiting_message END,
  waiting_until = CASE WHEN waiting_code = 'max_cost_reached' THEN waiting_until END`

/**
 * Moves an idle batch to its terminal status, releases what is still held and enqueues its
 * webhook deliveries. Every path to a terminal status but a refused facade batch comes here.
 */
export function finishBatch(db: Database, id: string, now: number): boolean {
  const stored = db.query<Row, any[]>('SELECT * FROM batches WHERE id = ?').get(id)
  const row = current(db, stored)
  if (!row || row.pending !== 0 || row.running !== 0) return false
  if (!['in_progress', 'finalizing', 'cancelling'].includes(row.status)) return false
  const account = db
    .query<Row, any[]>('SELECT held_usd FROM accounts WHERE id = ?')
    .get(row.account_id)!
  db.query<Row, any[]>('UPDATE accounts SET held_usd = ? WHERE id = ?').run(
    moneyText(Money.max(ZERO, new Money(account.held_usd).minus(row.held_usd))),
    row.account_id,
  )
  const status = terminalStatus(row as Parameters<typeof terminalStatus>[0])
  // The shards are folded into the row with the status: an ended batch is its row alone.
  const f = foldProgress(db, stored!)
  db.query<Row, any[]>(
    `UPDATE batches SET status = ?, finished_at = ?, held_usd = '0', ${KEEP_ENDED_WAITING},
       pending = ?, running = ?, succeeded = ?, failed = ?, cost_usd = ?, reserved_usd = ?,
       usage_input_tokens = ?, usage_cached_input_tokens = ?, usage_cache_write_tokens = ?,
       usage_output_tokens = ?, usage_uncached_cost_usd = ?, version = ? WHERE id = ?`,
  ).run(
    status,
    now,
    f.pending,
    f.running,
    f.succeeded,
    f.failed,
    moneyText(f.cost_usd),
    moneyText(Money.max(new Money(f.reserved_usd), ZERO)),
    f.usage_input_tokens,
    f.usage_cached_input_tokens,
    f.usage_cache_write_tokens,
    f.usage_output_tokens,
    moneyText(f.usage_uncached_cost_usd),
    f.version,
    id,
  )
  // The webhooks' outbox, in the same transaction: the event exists exactly when the status does.
  enqueueWebhookEvents(db, { id, accountId: row.account_id, status }, now)
  return true
}
