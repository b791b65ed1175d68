/**
 * The batch life cycle after admission, as the embedded store runs it: pending lines past the
 * deadline end expired, pending lines of a cancelling batch end cancelled, a running batch of an
 * account short of its holds says so (postgres-credit-short.ts), a batch with nothing
 * left to run spends one tick in `finalizing`, then takes its terminal status and gives
 * back its hold. Every instance may run this on its own tick: rows another instance is
 * advancing (or dispatching) are skipped, not waited for, and picked up on a later tick.
 */
import type postgres from 'postgres'
import { moneyText } from '../../money/decimal.ts'
import { foldLedger } from '../credit/postgres-account-ledger.ts'
import { capEndedWaiting } from './cap-waiting.ts'
import { noteCreditWaits } from './postgres-credit-short.ts'
import type { AdvancedBatches } from './dispatch-store.ts'
import { terminalStatus, withProgress } from './dispatch-rows.ts'
import { current, foldedColumns, foldedShards, progressJoin } from './postgres-batch-progress.ts'
import { enqueueWebhookEvents } from '../webhooks/postgres-webhooks.ts'

type Row = Record<string, any>

export async function advanceBatches(
  tx: postgres.TransactionSql,
  now: number,
): Promise<AdvancedBatches> {
  // Past the deadline: lines not yet run end `expired`; running ones may still finish.
  const overdue = await tx`
    SELECT b.id FROM batches b ${progressJoin(tx)}
    WHERE b.status IN ('in_progress', 'cancelling') AND b.deadline_at <= ${now}
      AND ${current(tx, 'pending')} > 0
    ORDER BY b.id FOR UPDATE OF b SKIP LOCKED`
  const expired = await endPending(tx, ids(overdue), 'expired', now)
  // A cancelling batch dispatches nothing more: lines that came back to pending (a retry, a
  // reaped or released lease) end cancelled rather than waiting for the deadline.
  const cancelling = await tx`
    SELECT b.id FROM batches b ${progressJoin(tx)}
    WHERE b.status = 'cancelling' AND ${current(tx, 'pending')} > 0
    ORDER BY b.id FOR UPDATE OF b SKIP LOCKED`
  let cancelled = await endPending(tx, ids(cancelling), 'cancelled', now)
  // A capped batch with nothing in flight and no pending line that fits what is left of its cap:
  // none ever will, and they end cancelled (docs/money-and-limits.md). While one still fits
  // (before the first claim, or waiting out a retry's backoff), the claim takes it: the batch is
  // made runnable again and the others wait for the end.
  const capped = await tx`
    SELECT b.id, b.max_cost_usd, b.cancelled, b.waiting_code, room.room,
      EXISTS (SELECT 1 FROM lines l WHERE l.batch_id = b.id AND l.status = 'pending'
        AND l.ceiling_usd <= room.room) AS fits
    FROM batches b ${progressJoin(tx)},
      LATERAL (SELECT b.max_cost_usd - ${current(tx, 'cost_usd')} - ${current(tx, 'reserved_usd')}
        AS room) room
    WHERE b.status = 'in_progress' AND b.max_cost_usd IS NOT NULL
      AND ${current(tx, 'running')} = 0 AND ${current(tx, 'pending')} > 0
    ORDER BY b.id FOR UPDATE OF b SKIP LOCKED`
  const stillFit = capped.filter((b) => b.fits && b.waiting_code === 'max_cost_reached')
  if (stillFit.length > 0)
    await tx`UPDATE batches SET waiting_code = NULL, waiting_message = NULL
      WHERE id = ANY(${ids(stillFit)}::text[]) AND waiting_code = 'max_cost_reached'`
  const overCap = capped.filter((b) => !b.fits)
  if (overCap.length > 0) cancelled += await endOverCap(tx, overCap, now)
  // A running batch of an account short of its holds says so until a deposit covers them.
  const waited = await noteCreditWaits(tx)
  // `finalizing` lasts one tick between a batch's last line and its terminal status.
  const finalizing = (
    await tx`
      SELECT b.*, p.* FROM batches b ${progressJoin(tx)}
      WHERE b.status = 'finalizing' ORDER BY b.id FOR UPDATE OF b SKIP LOCKED`
  ).map(withProgress)
  // Counted in this statement's snapshot, the lines and their shards agree: no line is pending
  // or running in it, and none can become so (a line only goes back to pending from running).
  const idle = (
    await tx`
      SELECT b.*, p.* FROM batches b ${progressJoin(tx)}
      WHERE b.status IN ('in_progress', 'cancelling') AND ${current(tx, 'pending')} = 0
        AND ${current(tx, 'running')} = 0
      ORDER BY b.id FOR UPDATE OF b SKIP LOCKED`
  ).map(withProgress)
  const finished = await finishBatches(
    tx,
    [...finalizing, ...idle.filter((row) => row.status === 'cancelling')],
    now,
  )
  const toFinalize = ids(idle.filter((row) => row.status === 'in_progress'))
  if (toFinalize.length > 0) {
    await tx`
      UPDATE batches SET status = 'finalizing', finalizing_at = ${now}
      WHERE id = ANY(${toFinalize}::text[])`
  }
  return {
    changed: [...finished, ...toFinalize],
    ended: { cancelled, expired },
    ...(waited.length > 0 && { waited }),
  }
}

/**
 * Moves idle batches (locked by the caller, rows with their progress added: withProgress) to
 * their terminal status, folding their progress shards into their rows, releases what they
 * still hold and enqueues their webhook deliveries. Returns the ids that changed. An ended batch waits
 * for nothing: its `waiting` is cleared, except a cap that stopped lines (it says why they were
 * cancelled, docs/money-and-limits.md). Every path to a terminal status but a refused facade batch comes here.
 */
export async function finishBatches(
  tx: postgres.TransactionSql,
  rows: readonly Row[],
  now: number,
): Promise<string[]> {
  const done = rows.filter(
    (row) =>
      Number(row.pending) === 0 &&
      Number(row.running) === 0 &&
      ['in_progress', 'finalizing', 'cancelling'].includes(row.status),
  )
  if (done.length === 0) return []
  const batchIds = ids(done)
  const accountIds = [...new Set(done.map((row) => row.account_id as string))].sort()
  await tx`SELECT id FROM accounts WHERE id = ANY(${accountIds}::text[]) ORDER BY id FOR UPDATE`
  // No settlement of these accounts runs now: their ledger shards go into their rows, so the
  // release below is exact against what they hold.
  await foldLedger(tx, accountIds)
  await tx`
    UPDATE accounts a SET held_usd = GREATEST(0, a.held_usd - t.held)
    FROM (SELECT b.account_id, sum(b.held_usd + coalesce(p.p_held_usd, 0)) AS held
          FROM batches b ${progressJoin(tx)}
          WHERE b.id = ANY(${batchIds}::text[]) GROUP BY b.account_id) t
    WHERE a.id = t.account_id`
  const statuses = done.map((row) => ({
    id: row.id,
    status: terminalStatus(row as Parameters<typeof terminalStatus>[0]),
  }))
  await tx`
    WITH ${foldedShards(tx, batchIds)}
    UPDATE batches b SET status = t.status, finished_at = ${now}, held_usd = 0,
      waiting_code = CASE WHEN b.waiting_code = 'max_cost_reached' THEN b.waiting_code END,
      waiting_message = CASE WHEN b.waiting_code = 'max_cost_reached' THEN b.waiting_message END,
      waiting_until = CASE WHEN b.waiting_code = 'max_cost_reached' THEN b.waiting_until END,
      ${foldedColumns(tx)}
    FROM jsonb_to_recordset(${tx.json(statuses)}) AS t (id text, status text)
      LEFT JOIN folded f ON f.batch_id = t.id
    WHERE b.id = t.id`
  // The webhooks' outbox, in the same transaction: the event exists exactly when the status does.
  await enqueueWebhookEvents(
    tx,
    done.map((row, index) => ({
      id: row.id as string,
      accountId: row.account_id as string,
      status: statuses[index]!.status,
    })),
    now,
  )
  return batchIds
}

/** Ends these batches' pending lines `status`, their counters moved with them; returns how many. */
async function endPending(
  tx: postgres.TransactionSql,
  batchIds: string[],
  status: 'cancelled' | 'expired',
  now: number,
): Promise<number> {
  if (batchIds.length === 0) return 0
  const code = status === 'expired' ? 'batch_expired' : 'batch_cancelled'
  const moved = await tx`
    WITH ended AS (
      UPDATE lines SET status = ${status}, error_code = ${code}, finished_at = ${now}
      WHERE batch_id = ANY(${batchIds}::text[]) AND status = 'pending'
      RETURNING batch_id),
    counts AS (SELECT batch_id, count(*)::int AS n FROM ended GROUP BY batch_id)
    UPDATE batches b SET pending = b.pending - counts.n,
      cancelled = b.cancelled + CASE WHEN ${status}::text = 'cancelled' THEN counts.n ELSE 0 END,
      expired = b.expired + CASE WHEN ${status}::text = 'expired' THEN counts.n ELSE 0 END
    FROM counts WHERE b.id = counts.batch_id
    RETURNING counts.n`
  return moved.reduce((total, row) => total + Number(row.n), 0)
}

/** Cancels the pending lines of these capped batches (locked) whose ceiling passes their room; returns how many. */
async function endOverCap(
  tx: postgres.TransactionSql,
  batches: readonly Row[],
  now: number,
): Promise<number> {
  const ended = await tx`
    WITH room AS (
      SELECT * FROM unnest(${ids(batches)}::text[], ${batches.map((b) => String(b.room))}::numeric[])
        AS r (batch_id, room)),
    ended AS (
      UPDATE lines l SET status = 'cancelled', error_code = 'max_cost_reached', finished_at = ${now}
      FROM room WHERE l.batch_id = room.batch_id AND l.status = 'pending'
        AND l.ceiling_usd > room.room
      RETURNING l.batch_id)
    SELECT batch_id, count(*)::int AS n FROM ended GROUP BY batch_id`
  if (ended.length === 0) return 0
  const byId = new Map(batches.map((batch) => [batch.id as string, batch]))
  const updates = ended.map((row) => {
    const batch = byId.get(row.batch_id)!
    const n = Number(row.n)
    const waiting = capEndedWaiting(
      row.batch_id,
      moneyText(batch.max_cost_usd),
      Number(batch.cancelled) + n,
    )
    return { id: row.batch_id, n, code: waiting.code, message: waiting.message }
  })
  await tx`
    UPDATE batches b SET pending = b.pending - t.n, cancelled = b.cancelled + t.n,
      waiting_code = t.code, waiting_message = t.message, waiting_until = NULL
    FROM jsonb_to_recordset(${tx.json(updates)}) AS t (id text, n int, code text, message text)
    WHERE b.id = t.id`
  return updates.reduce((total, update) => total + update.n, 0)
}

const ids = (rows: readonly Row[]) => rows.map((row) => row.id as string)
