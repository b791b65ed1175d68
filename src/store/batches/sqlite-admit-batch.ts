/**
 * Admission on the embedded store: in one IMMEDIATE transaction the idempotency check, the
 * open-batch limit, the daily spend limit, the credit hold (or the wait for credit), the batch
 * and all its lines. Either everything is stored or nothing is.
 */
import { accountView } from '../accounts/sqlite-accounts.ts'
import { sqliteQuery as q, type SqliteConnection } from '../connection.ts'
import { creditWaitColumns } from '../credit/daily-spend.ts'
import { current } from '../dispatch/sqlite-batch-progress.ts'
import { batchHold, Money, moneyText, ZERO } from '../../money/decimal.ts'
import { lineCeiling, rowToBatch } from './batch-rows.ts'
import type { AdmitResult, NewBatch, NewLine } from './batch-store.ts'
import * as creditWaits from './sqlite-credit-waits.ts'

const ROWS_PER_INSERT = 100

export function admitBatch(db: SqliteConnection, batch: NewBatch): AdmitResult {
  return db
    .transaction((): AdmitResult => {
      if (batch.idempotencyKey) {
        const existing = current(
          db,
          q(db, 'SELECT * FROM batches WHERE account_id = ? AND idempotency_key = ?').get(
            batch.accountId,
            batch.idempotencyKey,
          ),
        )
        if (existing) return { kind: 'duplicate', batch: rowToBatch(existing) }
      }
      const account = accountView(db, batch.accountId)
      if (!account) throw new Error(`account ${batch.accountId} vanished during admission`)
      if (account.openBatches >= account.maxOpenBatches) {
        return { kind: 'limit_exceeded', limit: account.maxOpenBatches, inUse: account.openBatches }
      }
      const hold = batchHold(batch.costCeilingUsd, batch.maxCostUsd)
      const row = q(db, 'SELECT * FROM accounts WHERE id = ?').get(batch.accountId)!
      // The daily limit before the credit: a deposit does not raise it, so no wait helps.
      if (row.daily_spend_limit_usd !== null) {
        const used = creditWaits.dailyUsed(db, row, batch.createdAt * 1000)
        if (used.plus(hold).greaterThan(row.daily_spend_limit_usd)) {
          return {
            kind: 'daily_limit_exceeded',
            limitUsd: moneyText(row.daily_spend_limit_usd),
            usedUsd: moneyText(used),
          }
        }
      }
      const available = new Money(account.balanceUsd).minus(account.heldUsd)
      const waitUntil = batch.creditWaitUntil ?? null
      // Waits only when its hold does not fit; the deposit it then asks for counts the batches
      // waiting before it, which a deposit reaches first.
      const waits = available.lessThan(hold)
      const ahead = waits && waitUntil !== null ? creditWaits.waitingHolds(db, batch.accountId) : []
      if (waits && waitUntil === null) {
        return { kind: 'insufficient_quota', availableUsd: moneyText(Money.max(available, ZERO)) }
      }
      if (!waits) {
        // account.heldUsd counts live leases as well; the column holds only what batches hold.
        q(db, 'UPDATE accounts SET held_usd = ? WHERE id = ?').run(
          moneyText(new Money(row.held_usd).plus(hold)),
          batch.accountId,
        )
      }
      const wait = waits
        ? creditWaitColumns(moneyText(hold), ahead, available, waitUntil!)
        : { code: null, message: null, until: null }
      insertBatch(db, batch, { status: waits ? 'validating' : 'in_progress', hold, wait })
      const { count, laneLines } = insertLines(db, batch.id, batch.lines, Boolean(batch.maxCostUsd))
      if (count !== batch.lineCount) {
        throw new Error(`batch ${batch.id}: ${count} lines given, ${batch.lineCount} declared`)
      }
      // Stored 0 above: 1 once a line is marked (the column's default is the safe side).
      if (laneLines) q(db, 'UPDATE batches SET lane_lines = 1 WHERE id = ?').run(batch.id)
      if (batch.parentBatchId) addRetry(db, batch)
      return {
        kind: 'created',
        batch: rowToBatch(q(db, 'SELECT * FROM batches WHERE id = ?').get(batch.id)!),
      }
    })
    .immediate()
}

/** The batch's row: `in_progress` holding its hold, or `validating` waiting for credit. */
function insertBatch(
  db: SqliteConnection,
  batch: NewBatch,
  admitted: {
    status: 'validating' | 'in_progress'
    hold: string
    wait: { code: string | null; message: string | null; until: number | null }
  },
) {
  const waits = admitted.status === 'validating'
  q(
    db,
    `INSERT INTO batches (id, account_id, name, endpoint, status, completion_window_hours,
       created_at, deadline_at, line_count, pending, cost_ceiling_usd, held_usd, source,
       metadata, input_file_id, idempotency_key, waiting_code, waiting_message, waiting_until,
       max_cost_usd, parent_batch_id, lane_lines, request_hash)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)`,
  ).run(
    batch.id,
    batch.accountId,
    batch.name,
    batch.endpoint,
    admitted.status,
    batch.completionWindowHours,
    batch.createdAt,
    batch.deadlineAt,
    batch.lineCount,
    batch.lineCount,
    moneyText(batch.costCeilingUsd),
    waits ? '0' : moneyText(admitted.hold),
    batch.source,
    batch.metadata ? JSON.stringify(batch.metadata) : null,
    batch.inputFileId,
    batch.idempotencyKey,
    admitted.wait.code,
    admitted.wait.message,
    admitted.wait.until,
    batch.maxCostUsd ? moneyText(batch.maxCostUsd) : null,
    batch.parentBatchId ?? null,
    batch.requestHash ?? null,
  )
}

/** A retry's parent lists it in its `retried_by` from the same transaction on. */
function addRetry(db: SqliteConnection, batch: NewBatch) {
  const parent = q(db, 'SELECT retried_by FROM batches WHERE id = ? AND account_id = ?').get(
    batch.parentBatchId,
    batch.accountId,
  )
  if (!parent) throw new Error(`batch ${batch.id}: parent ${batch.parentBatchId} not found`)
  const children: string[] = parent.retried_by ? JSON.parse(parent.retried_by) : []
  q(db, 'UPDATE batches SET retried_by = ? WHERE id = ?').run(
    JSON.stringify([...children, batch.id]),
    batch.parentBatchId,
  )
}

/**
 * Many rows per statement: one statement per line spent more time binding than writing. Each
 * line's batch-lane mark goes with it (null for most), and for a batch with a spend cap
 * (`capped`) its own ceiling. Says how many lines there were and whether any had a mark.
 */
function insertLines(
  db: SqliteConnection,
  batchId: string,
  lines: Iterable<NewLine>,
  capped: boolean,
): { count: number; laneLines: boolean } {
  let laneLines = false
  // The input goes in as the body's own UTF-8 bytes where there are some: CAST(blob AS TEXT)
  // relabels them as text (the database's encoding is UTF-8), with no decoding on the way.
  const ceiling = capped ? ', ceiling_usd' : ''
  const count = insertRows(db, {
    columns: `INSERT INTO lines (batch_id, line_no, custom_id, input, batch_lane${ceiling}) VALUES `,
    row: capped ? '(?, ?, ?, CAST(? AS TEXT), ?, ?)' : '(?, ?, ?, CAST(? AS TEXT), ?)',
    width: capped ? 6 : 5,
    lines,
    push(params, line) {
      const input = line.inputBytes ?? line.input
      params.push(batchId, line.lineNo, line.customId, input, line.batchLane ?? null)
      if (line.batchLane !== undefined) laneLines = true
      if (capped) params.push(moneyText(lineCeiling(line)))
    },
  })
  return { count, laneLines }
}

/** Inserts ROWS_PER_INSERT rows per statement, the rest one by one; `width` values a row. */
function insertRows(
  db: SqliteConnection,
  insert: {
    columns: string
    row: string
    width: number
    lines: Iterable<NewLine>
    push: (params: unknown[], line: NewLine) => void
  },
): number {
  const { columns, row, width } = insert
  const many = q(db, columns + Array(ROWS_PER_INSERT).fill(row).join(', '))
  const one = q(db, columns + row)
  const params: unknown[] = []
  let count = 0
  for (const line of insert.lines) {
    insert.push(params, line)
    count++
    if (params.length === ROWS_PER_INSERT * width) {
      many.run(...params)
      params.length = 0
    }
  }
  for (let i = 0; i < params.length; i += width) one.run(...params.slice(i, i + width))
  return count
}
