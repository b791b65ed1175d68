/**
 * The embedded store on bun:sqlite: one file under the data dir, WAL mode so readers never wait
 * for the dispatcher's writes. Every multi-row change runs in one IMMEDIATE transaction, so the
 * process can be killed at any point without half-written state. One process only: several
 * instances need PostgreSQL.
 */
import { current, readCurrent } from './batch-progress.ts'
import { createSqliteChunkStore } from '../batch-chunks/sqlite-chunks.ts'
import type { Database } from 'bun:sqlite'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { ENDED_BATCH_STATUSES, OPEN_BATCH_STATUSES, type LineStatus } from '../../domain.ts'
import { sqlWordList } from './sql-word-list.ts'
import { batchHold, Money, moneyText, ZERO } from '../../money/decimal.ts'
import {
  rowToAccount,
  rowToBatch,
  rowToFile,
  rowToKey,
  rowToLine,
  rowsToShares,
  lineCeiling,
} from '../rows.ts'
import type {
  FileLimits,
  FileQuotaDefaults,
  NewAdapter,
  NewSession,
  NewUpload,
  AccountView,
  AdmitResult,
  CancelResult,
  FileRecord,
  RejectedBatch,
  NewAccount,
  NewBatch,
  NewKey,
  NewLine,
  OpenedStore,
  Store,
  DeliveryResult,
  WebhookRecord,
  UsageAddition,
} from '../store.ts'
import { startCheckpointThread, type CheckpointThread } from './checkpoint-thread.ts'
import { createDispatchThread, type DispatchThread } from '../dispatch-thread.ts'
import { migrateSqlite } from './migrate.ts'
import { creditWaitColumns } from '../daily-spend.ts'
import * as creditWaits from './credit-waits.ts'
import * as startInTime from './start-in-time.ts'
import * as liveCredit from './live-credit.ts'
import { openSqliteDatabase } from './open-database.ts'
import { finishBatch, SqliteDispatch } from './sqlite-dispatch.ts'
import * as sessions from './sessions.ts'
import * as usage from './usage.ts'
import * as adapters from './adapters.ts'
import * as uploads from './uploads.ts'
import * as webhooks from './webhooks.ts'

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
  const dispatch = createDispatchThread(new URL('./dispatch-worker.ts', import.meta.url), [path])
  const store = new SqliteStore(db, dispatch, startCheckpointThread(path))
  return { store, dispatch, chunks: createSqliteChunkStore(db) }
}

const ROWS_PER_INSERT = 100

const OPEN = sqlWordList(OPEN_BATCH_STATUSES)

/** A rendered output or error file exists once its batch has ended with lines of its kind. */
export const VISIBLE_FILE = `(f.batch_id IS NULL OR (b.status IN ${sqlWordList(ENDED_BATCH_STATUSES)}
  AND ((f.kind = 'output' AND b.succeeded > 0) OR (f.kind = 'error' AND b.failed + b.cancelled + b.expired > 0))))`
const FILE_SELECT = `SELECT f.*, b.status AS batch_status, b.succeeded, b.failed, b.cancelled, b.expired
  FROM files f LEFT JOIN batches b ON b.id = f.batch_id`

/** Everything but the dispatcher's calls (sqlite-dispatch.ts); it closes their thread. */
class SqliteStore implements Store {
  readonly kind = 'sqlite' as const
  constructor(
    private readonly db: Database,
    private readonly dispatchThread: DispatchThread | null,
    private readonly checkpoints: CheckpointThread | null,
  ) {}

  private q(sql: string) {
    return this.db.query<Row, any[]>(sql)
  }

  private tx<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate()
  }

  async ping() {
    this.q('SELECT 1').get()
  }

  async close() {
    await this.dispatchThread?.close()
    await this.checkpoints?.close()
    this.db.close()
  }

  // ── accounts and keys ─────────────────────────────────────────────────────────────────────

  private accountView(id: string): AccountView | null {
    const row = this.q(
      `SELECT a.*, (SELECT count(*) FROM batches b WHERE b.account_id = a.id AND b.status IN ${OPEN})
         AS open_batches FROM accounts a WHERE a.id = ?`,
    ).get(id)
    if (!row) return null
    // Live leases are holds too: held_usd shows them, so available_usd is what may still be spent.
    const account = rowToAccount(row)
    const held = new Money(account.heldUsd).plus(liveCredit.leasedUsd(this.db, id, Date.now()))
    return { ...account, heldUsd: moneyText(held), openBatches: Number(row.open_batches) }
  }

  async createAccount(account: NewAccount) {
    this.q(
      `INSERT INTO accounts (id, name, balance_usd, held_usd, max_open_batches, rate_limit_per_minute, created_at)
       VALUES (?, ?, ?, '0', ?, ?, ?)`,
    ).run(
      account.id,
      account.name,
      moneyText(account.creditUsd),
      account.maxOpenBatches,
      account.rateLimitPerMinute,
      account.createdAt,
    )
    return this.accountView(account.id)!
  }

  async getAccount(id: string) {
    return this.accountView(id)
  }

  async hasAccounts() {
    return this.q('SELECT 1 FROM accounts LIMIT 1').get() != null
  }

  // ── usage (usage.ts) ──────────────────────────────────────────────────────────────────────

  async addUsage(rows: readonly UsageAddition[]) {
    usage.addUsage(this.db, rows)
  }

  async usageRows(accountId: string, fromDay: string, toDay: string) {
    return usage.usageRows(this.db, accountId, fromDay, toDay)
  }

  async addCredit(id: string, amountUsd: string) {
    return this.tx(() => {
      const row = this.q('SELECT balance_usd FROM accounts WHERE id = ?').get(id)
      if (!row) return null
      const next = Money.max(ZERO, new Money(row.balance_usd).plus(amountUsd))
      this.q('UPDATE accounts SET balance_usd = ? WHERE id = ?').run(moneyText(next), id)
      return this.accountView(id)
    })
  }

  async createKey(key: NewKey) {
    if (!this.q('SELECT 1 FROM accounts WHERE id = ?').get(key.accountId)) return null
    this.q(
      `INSERT INTO api_keys (id, account_id, hash, prefix, name, scopes, rate_limit_per_minute, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(
      key.id,
      key.accountId,
      key.hash,
      key.prefix,
      key.name,
      key.scopes.join(','),
      key.rateLimitPerMinute,
      key.createdAt,
    )
    return rowToKey(this.q('SELECT * FROM api_keys WHERE id = ?').get(key.id)!)
  }

  async revokeKey(id: string, at: number) {
    this.tx(() => {
      this.q('UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?').run(at, id)
      sessions.deleteKeySessions(this.db, id)
    })
    const row = this.q('SELECT * FROM api_keys WHERE id = ?').get(id)
    return row ? rowToKey(row) : null
  }

  // ── live credit (docs/live.md): live-credit.ts ────────────────────────────────────────────────

  async takeLiveCredit(request: Parameters<Store['takeLiveCredit']>[0]) {
    return this.tx(() => liveCredit.takeLiveCredit(this.db, request))
  }

  async renewLiveCredit(
    instanceId: string,
    accountIds: readonly string[],
    nowMs: number,
    expiresAtMs: number,
  ) {
    return this.tx(() =>
      liveCredit.renewLiveCredit(this.db, instanceId, accountIds, nowMs, expiresAtMs),
    )
  }

  async writeLiveCharges(group: Parameters<Store['writeLiveCharges']>[0]) {
    return this.tx(() => liveCredit.writeLiveCharges(this.db, group))
  }

  async dropLiveCredit(instanceId: string) {
    this.q('DELETE FROM credit_leases WHERE instance_id = ?').run(instanceId)
  }

  // ── daily spend limit and batches waiting for credit (docs/money-and-limits.md, docs/open-models.md): credit-waits.ts ────

  async getDailySpend(accountId: string, nowMs: number) {
    return creditWaits.getDailySpend(this.db, accountId, nowMs)
  }

  async setDailySpendLimit(accountId: string, limitUsd: string | null) {
    return (
      this.q('UPDATE accounts SET daily_spend_limit_usd = ? WHERE id = ?').run(
        limitUsd === null ? null : moneyText(limitUsd),
        accountId,
      ).changes > 0
    )
  }

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

  async findKey(hash: string) {
    const key = this.q('SELECT * FROM api_keys WHERE hash = ? AND revoked_at IS NULL').get(hash)
    if (!key) return null
    const account = this.q('SELECT * FROM accounts WHERE id = ?').get(key.account_id)!
    return { key: rowToKey(key), account: rowToAccount(account) }
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

  // ── retention ───────────────────────────────────────────────────────────────────────────

  async purgeResults(cutoff: number, limit: number, now: number) {
    return this.tx(() => {
      const ids = this.q(
        `SELECT id FROM batches WHERE finished_at < ? AND purged_at IS NULL ORDER BY finished_at LIMIT ?`,
      )
        .all(cutoff, limit)
        .map((row) => row.id as string)
      for (const id of ids) {
        this.q('DELETE FROM lines WHERE batch_id = ?').run(id)
        this.q('DELETE FROM files WHERE batch_id = ?').run(id)
        // The webhook delivery log is kept as long as the results (its retries ended long ago).
        this.q('DELETE FROM webhook_deliveries WHERE batch_id = ?').run(id)
        this.q('UPDATE batches SET purged_at = ? WHERE id = ?').run(now, id)
      }
      return ids
    })
  }

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

  async deleteStaleUploads(cutoff: number, limit: number) {
    return this.q(
      `DELETE FROM files WHERE id IN (
         SELECT id FROM files WHERE kind = 'upload' AND last_used_at < ? LIMIT ?) RETURNING id`,
    )
      .all(cutoff, limit)
      .map((row) => row.id as string)
  }

  // ── file quotas, uploads in progress (uploads.ts), dashboard sessions (sessions.ts) ──────

  async reserveUpload(upload: NewUpload, defaults: FileQuotaDefaults) {
    return uploads.reserveUpload(this.db, upload, defaults)
  }

  async growUpload(
    fileId: string,
    need: number,
    want: number,
    nowMs: number,
    defaults: FileQuotaDefaults,
  ) {
    return uploads.growUpload(this.db, fileId, need, want, nowMs, defaults)
  }

  async commitUpload(file: FileRecord) {
    return uploads.commitUpload(this.db, file)
  }

  async releaseUpload(fileId: string) {
    uploads.releaseUpload(this.db, fileId)
  }

  async expireUploads(staleBeforeMs: number, limit: number) {
    return uploads.expireUploads(this.db, staleBeforeMs, limit)
  }

  async knownFileIds(ids: readonly string[]) {
    return uploads.knownFileIds(this.db, ids)
  }

  async getFileQuota(accountId: string) {
    return uploads.getFileQuota(this.db, accountId)
  }

  async setFileQuota(accountId: string, limits: FileLimits) {
    return uploads.setFileQuota(this.db, accountId, limits)
  }

  // ── fine-tuned adapters (docs/open-models.md): adapters.ts ─────────────────────────────────────────

  async createAdapter(adapter: NewAdapter) {
    return this.tx(() => adapters.createAdapter(this.db, adapter))
  }

  async getAdapter(id: string) {
    return adapters.getAdapter(this.db, id)
  }

  async listAdapters(accountId: string, options: { activeOnly?: boolean } = {}) {
    return adapters.listAdapters(this.db, accountId, options.activeOnly ?? false)
  }

  async deactivateAdapter(id: string, at: number) {
    return adapters.deactivateAdapter(this.db, id, at)
  }

  async createSession(session: NewSession) {
    sessions.createSession(this.db, session)
  }

  async findSession(hash: string, now: number) {
    return sessions.findSession(this.db, hash, now)
  }

  async deleteSession(hash: string) {
    sessions.deleteSession(this.db, hash)
  }

  async deleteExpiredSessions(now: number) {
    return sessions.deleteExpiredSessions(this.db, now)
  }

  // ── webhooks and their outbox (webhooks.ts) ──────────────────────────────────────────────

  async createWebhook(webhook: WebhookRecord, maxPerAccount: number) {
    return webhooks.createWebhook(this.db, webhook, maxPerAccount)
  }

  async listWebhooks(accountId: string) {
    return webhooks.listWebhooks(this.db, accountId)
  }

  async deleteWebhook(accountId: string, id: string) {
    return webhooks.deleteWebhook(this.db, accountId, id)
  }

  async listDeliveries(
    accountId: string,
    webhookId: string,
    page: { limit: number; after: string | null },
  ) {
    return webhooks.listDeliveries(this.db, accountId, webhookId, page)
  }

  async claimDeliveries(owner: string, limit: number, nowMs: number, leaseUntilMs: number) {
    return webhooks.claimDeliveries(this.db, owner, limit, nowMs, leaseUntilMs)
  }

  async finishDelivery(
    owner: string,
    delivery: { webhookId: string; eventId: string },
    result: DeliveryResult,
    nowMs: number,
    disableAfterMs?: number,
  ) {
    return webhooks.finishDelivery(this.db, owner, delivery, result, nowMs, disableAfterMs)
  }

  async enableWebhook(accountId: string, id: string) {
    return webhooks.enableWebhook(this.db, accountId, id)
  }

  async releaseDeliveries(owner: string, nowMs: number) {
    return webhooks.releaseDeliveries(this.db, owner, nowMs)
  }

  // ── files ─────────────────────────────────────────────────────────────────────────────────

  async createFile(file: FileRecord) {
    uploads.insertFile(this.db, file)
  }

  async getFile(accountId: string, id: string) {
    const row = this.q(
      `${FILE_SELECT} WHERE f.id = ? AND f.account_id = ? AND ${VISIBLE_FILE}`,
    ).get(id, accountId)
    return row ? rowToFile(row) : null
  }

  async listFiles(
    accountId: string,
    page: { limit: number; after: string | null; purpose: string | null; order: 'asc' | 'desc' },
  ) {
    const direction = page.order === 'asc' ? 'ASC' : 'DESC'
    const rows = this.q(
      `${FILE_SELECT} WHERE f.account_id = ? AND ${VISIBLE_FILE}
         AND (? IS NULL OR f.purpose = ?) AND (? IS NULL OR f.id ${page.order === 'asc' ? '>' : '<'} ?)
       ORDER BY f.id ${direction} LIMIT ?`,
    ).all(accountId, page.purpose, page.purpose, page.after, page.after, page.limit + 1)
    return { files: rows.slice(0, page.limit).map(rowToFile), hasMore: rows.length > page.limit }
  }

  async deleteFile(accountId: string, id: string) {
    return (
      this.q('DELETE FROM files WHERE id = ? AND account_id = ?').run(id, accountId).changes > 0
    )
  }

  async setFileBytes(id: string, bytes: number) {
    this.q('UPDATE files SET bytes = ? WHERE id = ?').run(bytes, id)
  }

  async touchFile(id: string, at: number) {
    this.q('UPDATE files SET last_used_at = ? WHERE id = ?').run(at, id)
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
