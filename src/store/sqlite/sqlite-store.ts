/**
 * The embedded store on bun:sqlite: one file under the data dir, WAL mode so readers never wait
 * for the dispatcher's writes. Every multi-row change runs in one IMMEDIATE transaction, so the
 * process can be killed at any point without half-written state. One process only: several
 * instances need PostgreSQL.
 *
 * Past 400 lines (about 420) because the batch calls still live here (admission with its line
 * inserts, cancel, reads); the roles with a folder of their own (src/store/<role>/) are set on
 * the store by its constructor (sqliteRoles).
 */
import { current, readCurrent } from '../dispatch/sqlite-batch-progress.ts'
import { createSqliteChunkStore } from '../batch-chunks/sqlite-chunks.ts'
import type { Database } from 'bun:sqlite'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { OPEN_BATCH_STATUSES, type LineStatus } from '../../domain.ts'
import { sqlWordList } from './sql-word-list.ts'
import { batchHold, Money, moneyText, ZERO } from '../../money/decimal.ts'
import { rowToBatch, rowToLine, rowsToShares, lineCeiling } from '../rows.ts'
import type {
  AccountView,
  AdmitResult,
  CancelResult,
  RejectedBatch,
  NewBatch,
  NewLine,
  OpenedStore,
  RoleStores,
  Store,
} from '../store.ts'
import { startCheckpointThread, type CheckpointThread } from './checkpoint-thread.ts'
import { createDispatchThread, type DispatchThread } from '../dispatch/dispatch-thread.ts'
import { migrateSqlite } from './migrate.ts'
import { creditWaitColumns } from '../credit/daily-spend.ts'
import * as creditWaits from '../batches/sqlite-credit-waits.ts'
import * as startInTime from '../batches/sqlite-start-in-time.ts'
import { createSqliteCreditStore } from '../credit/sqlite-credit.ts'
import { openSqliteDatabase } from './open-database.ts'
import { finishBatch, SqliteDispatch } from '../dispatch/sqlite-dispatch.ts'
import { createSqliteUsageStore } from '../usage/sqlite-usage.ts'
import { accountView, createSqliteAccountStore } from '../accounts/sqlite-accounts.ts'
import { createSqliteFineTuneStore } from '../fine-tunes/sqlite-fine-tunes.ts'
import { createSqliteFileStore } from '../files/sqlite-files.ts'
import { createSqliteRetentionStore } from '../retention/sqlite-retention.ts'
import * as webhooks from '../webhooks/sqlite-webhooks.ts'

type Row = Record<string, any>

/**
 * Opens (creating if needed) `<dataDir>/multigrid.sqlite`, or `:memory:` when dataDir is null,
 * and applies pending migrations (migrate.ts). With a file, the dispatcher's statements run on a
 * thread of their own (dispatch-thread.ts), and so do checkpoints (checkpoint-thread.ts); in
 * memory they run on the same connection. Closing the store closes both.
 */
export function createSqliteStore(dataDir: string | null): OpenedStore {
  if (!dataDir) {
    const db = openSqliteDatabase(':memory:')
    migrateSqlite(db)
    return {
      store: new SqliteStore(db, null, null),
      dispatch: new SqliteDispatch(db),
      chunks: createSqliteChunkStore(db),
    }
  }
  mkdirSync(dataDir, { recursive: true })
  const path = join(dataDir, 'multigrid.sqlite')
  const db = openSqliteDatabase(path)
  try {
    migrateSqlite(db)
  } catch (error) {
    db.close()
    throw error
  }
  const dispatch = createDispatchThread(
    new URL('../dispatch/sqlite-dispatch-worker.ts', import.meta.url),
    [path],
  )
  const store = new SqliteStore(db, dispatch, startCheckpointThread(path))
  return { store, dispatch, chunks: createSqliteChunkStore(db) }
}

const ROWS_PER_INSERT = 100

const OPEN = sqlWordList(OPEN_BATCH_STATUSES)

/** The roles' calls (src/store/<role>/), each given the connection only. */
const sqliteRoles = (db: Database): RoleStores => ({
  ...createSqliteAccountStore(db),
  ...createSqliteCreditStore(db),
  ...createSqliteFileStore(db),
  ...createSqliteRetentionStore(db),
  ...createSqliteUsageStore(db),
  ...createSqliteFineTuneStore(db),
  ...webhooks.createSqliteWebhookStore(db),
})

// The roles' calls are set on the store by its constructor (sqliteRoles).
interface SqliteStore extends RoleStores {}

/** Everything but the dispatcher's calls (sqlite-dispatch.ts); it closes their thread. */
class SqliteStore implements Store {
  readonly kind = 'sqlite' as const
  constructor(
    private readonly db: Database,
    private readonly dispatchThread: DispatchThread | null,
    private readonly checkpoints: CheckpointThread | null,
  ) {
    Object.assign(this, sqliteRoles(db))
  }

  private q(sql: string) {
    return this.db.query<Row, any[]>(sql)
  }

  private tx<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate()
  }

  /** The account with what it holds now (accounts/sqlite-accounts.ts), for admission. */
  private accountView(id: string): AccountView | null {
    return accountView(this.db, id)
  }

  async ping() {
    this.q('SELECT 1').get()
  }

  async close() {
    await this.dispatchThread?.close()
    await this.checkpoints?.close()
    this.db.close()
  }

  // ── batches waiting for credit (credit-waits.ts) and starting in time (start-in-time.ts) ──

  async admitWaitingBatches(nowMs: number) {
    // A read first: every instance runs this every second, and the write lock is the dispatcher's.
    if (!creditWaits.anyWaiting(this.db)) return { started: [], failed: [] }
    return this.tx(() => creditWaits.admitWaitingBatches(this.db, nowMs))
  }

  async failUnstartedBatches(nowMs: number) {
    const now = Math.floor(nowMs / 1000)
    // A read first, as for the credit waits: the write lock is the dispatcher's.
    if (!startInTime.anyUnstarted(this.db, now)) return []
    return this.tx(() => startInTime.failUnstartedBatches(this.db, now))
  }

  // ── batches ───────────────────────────────────────────────────────────────────────────────

  async admitBatch(batch: NewBatch): Promise<AdmitResult> {
    return this.tx((): AdmitResult => {
      if (batch.idempotencyKey) {
        const existing = current(
          this.db,
          this.q('SELECT * FROM batches WHERE account_id = ? AND idempotency_key = ?').get(
            batch.accountId,
            batch.idempotencyKey,
          ),
        )
        if (existing) return { kind: 'duplicate', batch: rowToBatch(existing) }
      }
      const account = this.accountView(batch.accountId)
      if (!account) throw new Error(`account ${batch.accountId} vanished during admission`)
      if (account.openBatches >= account.maxOpenBatches) {
        return { kind: 'limit_exceeded', limit: account.maxOpenBatches, inUse: account.openBatches }
      }
      const hold = batchHold(batch.costCeilingUsd, batch.maxCostUsd)
      const row = this.q('SELECT * FROM accounts WHERE id = ?').get(batch.accountId)!
      // The daily limit before the credit: a deposit does not raise it, so no wait helps.
      if (row.daily_spend_limit_usd !== null) {
        const used = creditWaits.dailyUsed(this.db, row, batch.createdAt * 1000)
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
      // A batch that may wait queues behind the account's batches already waiting.
      const ahead = waitUntil === null ? [] : creditWaits.waitingHolds(this.db, batch.accountId)
      const waits = available.lessThan(hold) || ahead.length > 0
      if (waits && waitUntil === null) {
        return { kind: 'insufficient_quota', availableUsd: moneyText(Money.max(available, ZERO)) }
      }
      if (!waits) {
        // account.heldUsd counts live leases as well; the column holds only what batches hold.
        this.q('UPDATE accounts SET held_usd = ? WHERE id = ?').run(
          moneyText(new Money(row.held_usd).plus(hold)),
          batch.accountId,
        )
      }
      const wait = waits
        ? creditWaitColumns(moneyText(hold), ahead, available, waitUntil!)
        : { code: null, message: null, until: null }
      this.q(
        `INSERT INTO batches (id, account_id, name, endpoint, status, completion_window_hours,
           created_at, deadline_at, line_count, pending, cost_ceiling_usd, held_usd, source,
           metadata, input_file_id, idempotency_key, waiting_code, waiting_message, waiting_until,
           max_cost_usd, parent_batch_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        batch.id,
        batch.accountId,
        batch.name,
        batch.endpoint,
        waits ? 'validating' : 'in_progress',
        batch.completionWindowHours,
        batch.createdAt,
        batch.deadlineAt,
        batch.lineCount,
        batch.lineCount,
        moneyText(batch.costCeilingUsd),
        waits ? '0' : moneyText(hold),
        batch.source,
        batch.metadata ? JSON.stringify(batch.metadata) : null,
        batch.inputFileId,
        batch.idempotencyKey,
        wait.code,
        wait.message,
        wait.until,
        batch.maxCostUsd ? moneyText(batch.maxCostUsd) : null,
        batch.parentBatchId ?? null,
      )
      const count = batch.maxCostUsd
        ? this.insertCappedLines(batch.id, batch.lines)
        : this.insertLines(batch.id, batch.lines)
      if (count !== batch.lineCount) {
        throw new Error(`batch ${batch.id}: ${count} lines given, ${batch.lineCount} declared`)
      }
      if (batch.parentBatchId) {
        const parent = this.q('SELECT retried_by FROM batches WHERE id = ? AND account_id = ?').get(
          batch.parentBatchId,
          batch.accountId,
        )
        if (!parent) throw new Error(`batch ${batch.id}: parent ${batch.parentBatchId} not found`)
        const children: string[] = parent.retried_by ? JSON.parse(parent.retried_by) : []
        this.q('UPDATE batches SET retried_by = ? WHERE id = ?').run(
          JSON.stringify([...children, batch.id]),
          batch.parentBatchId,
        )
      }
      return {
        kind: 'created',
        batch: rowToBatch(this.q('SELECT * FROM batches WHERE id = ?').get(batch.id)!),
      }
    })
  }

  async recordRejectedBatch(batch: RejectedBatch) {
    return this.tx(() => {
      this.insertRejectedBatch(batch)
      // Failed at once: its webhooks hear of it like any other failed batch.
      webhooks.enqueueWebhookEvents(
        this.db,
        { id: batch.id, accountId: batch.accountId, status: 'failed' },
        batch.createdAt,
      )
      return rowToBatch(this.q('SELECT * FROM batches WHERE id = ?').get(batch.id)!)
    })
  }

  private insertRejectedBatch(batch: RejectedBatch) {
    this.q(
      `INSERT INTO batches (id, account_id, name, endpoint, status, completion_window_hours,
         created_at, deadline_at, finished_at, line_count, pending, cost_ceiling_usd, held_usd,
         source, metadata, input_file_id, errors)
       VALUES (?, ?, ?, ?, 'failed', ?, ?, ?, ?, 0, 0, '0', '0', ?, ?, ?, ?)`,
    ).run(
      batch.id,
      batch.accountId,
      batch.name,
      batch.endpoint,
      batch.completionWindowHours,
      batch.createdAt,
      batch.createdAt + batch.completionWindowHours * 3600,
      batch.createdAt,
      batch.source,
      batch.metadata ? JSON.stringify(batch.metadata) : null,
      batch.inputFileId,
      JSON.stringify(batch.errors),
    )
  }

  // ── deleting an ended batch ───────────────────────────────────────────────────────────────────────────

  async deleteEndedBatch(accountId: string, id: string) {
    return this.tx(() => {
      const found = this.q(
        'SELECT id FROM batches WHERE id = ? AND account_id = ? AND finished_at IS NOT NULL',
      ).get(id, accountId)
      if (!found) return false
      this.q('DELETE FROM lines WHERE batch_id = ?').run(id)
      this.q('DELETE FROM files WHERE batch_id = ?').run(id)
      this.q('DELETE FROM webhook_deliveries WHERE batch_id = ?').run(id)
      this.q('DELETE FROM batch_providers WHERE batch_id = ?').run(id)
      this.q('DELETE FROM batches WHERE id = ?').run(id)
      return true
    })
  }

  /** Many rows per statement: one statement per line spent more time binding than writing. */
  private insertLines(batchId: string, lines: Iterable<NewLine>): number {
    // The input goes in as the body's own UTF-8 bytes where there are some: CAST(blob AS TEXT)
    // relabels them as text (the database's encoding is UTF-8), with no decoding on the way.
    return this.insertRows(
      'INSERT INTO lines (batch_id, line_no, custom_id, input) VALUES ',
      '(?, ?, ?, CAST(? AS TEXT))',
      4,
      lines,
      (params, line) =>
        params.push(batchId, line.lineNo, line.customId, line.inputBytes ?? line.input),
    )
  }

  /** insertLines with each line's own ceiling, for a batch with a spend cap. */
  private insertCappedLines(batchId: string, lines: Iterable<NewLine>): number {
    return this.insertRows(
      'INSERT INTO lines (batch_id, line_no, custom_id, input, ceiling_usd) VALUES ',
      '(?, ?, ?, CAST(? AS TEXT), ?)',
      5,
      lines,
      (params, line) =>
        params.push(
          batchId,
          line.lineNo,
          line.customId,
          line.inputBytes ?? line.input,
          moneyText(lineCeiling(line)),
        ),
    )
  }

  /** Inserts ROWS_PER_INSERT rows per statement, the rest one by one; `width` values a row. */
  private insertRows(
    columns: string,
    row: string,
    width: number,
    lines: Iterable<NewLine>,
    push: (params: unknown[], line: NewLine) => void,
  ): number {
    const many = this.q(columns + Array(ROWS_PER_INSERT).fill(row).join(', '))
    const one = this.q(columns + row)
    const params: unknown[] = []
    let count = 0
    for (const line of lines) {
      push(params, line)
      count++
      if (params.length === ROWS_PER_INSERT * width) {
        many.run(...params)
        params.length = 0
      }
    }
    for (let i = 0; i < params.length; i += width) one.run(...params.slice(i, i + width))
    return count
  }

  async findByIdempotencyKey(accountId: string, key: string) {
    const [row] = readCurrent(this.db, () =>
      this.q('SELECT * FROM batches WHERE account_id = ? AND idempotency_key = ?').all(
        accountId,
        key,
      ),
    )
    return row ? rowToBatch(row) : null
  }

  async getBatch(accountId: string, id: string) {
    const [row] = readCurrent(this.db, () =>
      this.q('SELECT * FROM batches WHERE id = ? AND account_id = ?').all(id, accountId),
    )
    return row ? rowToBatch(row) : null
  }

  async providerShares(batchIds: readonly string[]) {
    if (batchIds.length === 0) return new Map()
    const rows = this.q(
      `SELECT * FROM batch_providers WHERE batch_id IN (${batchIds.map(() => '?').join(', ')})`,
    ).all(...batchIds)
    return rowsToShares(rows)
  }

  async listBatches(accountId: string, page: { limit: number; after: string | null }) {
    const rows = readCurrent(this.db, () =>
      page.after
        ? this.q(
            'SELECT * FROM batches WHERE account_id = ? AND id < ? ORDER BY id DESC LIMIT ?',
          ).all(accountId, page.after, page.limit + 1)
        : this.q('SELECT * FROM batches WHERE account_id = ? ORDER BY id DESC LIMIT ?').all(
            accountId,
            page.limit + 1,
          ),
    )
    return { batches: rows.slice(0, page.limit).map(rowToBatch), hasMore: rows.length > page.limit }
  }

  async cancelBatch(accountId: string, id: string, now: number): Promise<CancelResult> {
    return this.tx((): CancelResult => {
      const row = current(
        this.db,
        this.q('SELECT * FROM batches WHERE id = ? AND account_id = ?').get(id, accountId),
      )
      if (!row) return { kind: 'not_found' }
      if (row.status === 'cancelling') return { kind: 'cancelled', batch: rowToBatch(row) }
      if (row.status !== 'in_progress' && row.status !== 'validating') {
        return { kind: 'conflict', batch: rowToBatch(row) }
      }
      const cancelled = this.q(
        `UPDATE lines SET status = 'cancelled', error_code = 'batch_cancelled', finished_at = ?
         WHERE batch_id = ? AND status = 'pending'`,
      ).run(now, id).changes
      this.q(
        `UPDATE batches SET status = 'cancelling', cancel_requested_at = ?, pending = pending - ?,
           cancelled = cancelled + ? WHERE id = ?`,
      ).run(now, cancelled, cancelled, id)
      finishBatch(this.db, id, now)
      return {
        kind: 'cancelled',
        batch: rowToBatch(current(this.db, this.q('SELECT * FROM batches WHERE id = ?').get(id))!),
      }
    })
  }

  async readLines(
    batchId: string,
    query: { afterLineNo: number; limit: number; statuses: readonly LineStatus[] | null },
  ) {
    const filter = query.statuses
      ? `AND status IN (${query.statuses.map(() => '?').join(', ')})`
      : ''
    const rows = this.q(
      `SELECT * FROM lines WHERE batch_id = ? AND line_no > ? ${filter} ORDER BY line_no LIMIT ?`,
    ).all(batchId, query.afterLineNo, ...(query.statuses ?? []), query.limit)
    return rows.map(rowToLine)
  }
}
