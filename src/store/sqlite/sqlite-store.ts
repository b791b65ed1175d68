/**
 * The embedded store on bun:sqlite: one file under the data dir, WAL mode so readers never wait
 * for the dispatcher's writes. Every multi-row change runs in one IMMEDIATE transaction, so the
 * process can be killed at any point without half-written state. One process only: several
 * instances need PostgreSQL.
 */
import { Database } from 'bun:sqlite'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import type { BatchStatus, LineStatus } from '../../domain.ts'
import { Money, minMoney, moneyText, ZERO } from '../../money/decimal.ts'
import { rowToAccount, rowToBatch, rowToFile, rowToKey, rowToLine, rowToRunnable, terminalStatus } from '../rows.ts'
import type {
  AccountView,
  AdmitResult,
  CancelResult,
  ClaimedLine,
  FileRecord,
  RejectedBatch,
  LineOutcome,
  NewAccount,
  NewBatch,
  NewKey,
  NewLine,
  RunnableBatch,
  Store,
} from '../store.ts'
import schema from './schema.sql' with { type: 'text' }

type Row = Record<string, any>

/** Opens (creating if needed) `<dataDir>/multigrid.sqlite`, or `:memory:` when dataDir is null. */
export function createSqliteStore(dataDir: string | null): Store {
  let path = ':memory:'
  if (dataDir) {
    mkdirSync(dataDir, { recursive: true })
    path = join(dataDir, 'multigrid.sqlite')
  }
  const db = new Database(path, { create: true })
  // 16 KiB pages (only takes effect on a new file): batch lines are ~300-byte rows written
  // 50,000 at a time, and bigger pages cut admission's page writes by a third.
  db.exec('PRAGMA page_size = 16384')
  db.exec('PRAGMA journal_mode = WAL')
  db.exec('PRAGMA synchronous = NORMAL')
  db.exec('PRAGMA busy_timeout = 5000')
  db.exec('PRAGMA foreign_keys = ON')
  db.exec(schema)
  return new SqliteStore(db)
}

const ROWS_PER_INSERT = 100

const OPEN = `('validating', 'in_progress', 'finalizing', 'cancelling')`

/** A rendered output or error file exists once its batch has ended with lines of its kind. */
export const VISIBLE_FILE = `(f.batch_id IS NULL OR (b.status IN ('completed', 'failed', 'cancelled', 'expired')
  AND ((f.kind = 'output' AND b.succeeded > 0) OR (f.kind = 'error' AND b.failed + b.cancelled + b.expired > 0))))`
const FILE_SELECT = `SELECT f.*, b.status AS batch_status, b.succeeded, b.failed, b.cancelled, b.expired
  FROM files f LEFT JOIN batches b ON b.id = f.batch_id`

class SqliteStore implements Store {
  readonly kind = 'sqlite' as const
  constructor(private readonly db: Database) {}

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
    this.db.close()
  }

  // ── accounts and keys ─────────────────────────────────────────────────────────────────────

  private accountView(id: string): AccountView | null {
    const row = this.q(
      `SELECT a.*, (SELECT count(*) FROM batches b WHERE b.account_id = a.id AND b.status IN ${OPEN})
         AS open_batches FROM accounts a WHERE a.id = ?`,
    ).get(id)
    return row ? { ...rowToAccount(row), openBatches: Number(row.open_batches) } : null
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
    this.q('UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?').run(at, id)
    const row = this.q('SELECT * FROM api_keys WHERE id = ?').get(id)
    return row ? rowToKey(row) : null
  }

  async chargeAccount(accountId: string, costUsd: string) {
    return this.tx(() => {
      const row = this.q('SELECT balance_usd FROM accounts WHERE id = ?').get(accountId)
      if (!row) return '0'
      const balance = new Money(row.balance_usd)
      const charged = minMoney(new Money(costUsd), balance)
      this.q('UPDATE accounts SET balance_usd = ? WHERE id = ?').run(moneyText(balance.minus(charged)), accountId)
      return moneyText(charged)
    })
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
        const existing = this.q(
          'SELECT * FROM batches WHERE account_id = ? AND idempotency_key = ?',
        ).get(batch.accountId, batch.idempotencyKey)
        if (existing) return { kind: 'duplicate', batch: rowToBatch(existing) }
      }
      const account = this.accountView(batch.accountId)
      if (!account) throw new Error(`account ${batch.accountId} vanished during admission`)
      if (account.openBatches >= account.maxOpenBatches) {
        return { kind: 'limit_exceeded', limit: account.maxOpenBatches, inUse: account.openBatches }
      }
      const available = new Money(account.balanceUsd).minus(account.heldUsd)
      if (available.lessThan(batch.costCeilingUsd)) {
        return { kind: 'insufficient_quota', availableUsd: moneyText(Money.max(available, ZERO)) }
      }
      this.q('UPDATE accounts SET held_usd = ? WHERE id = ?').run(
        moneyText(new Money(account.heldUsd).plus(batch.costCeilingUsd)),
        batch.accountId,
      )
      this.q(
        `INSERT INTO batches (id, account_id, name, endpoint, status, completion_window_hours,
           created_at, deadline_at, line_count, pending, cost_ceiling_usd, held_usd, source,
           metadata, input_file_id, idempotency_key)
         VALUES (?, ?, ?, ?, 'in_progress', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ).run(
        batch.id,
        batch.accountId,
        batch.name,
        batch.endpoint,
        batch.completionWindowHours,
        batch.createdAt,
        batch.deadlineAt,
        batch.lineCount,
        batch.lineCount,
        moneyText(batch.costCeilingUsd),
        moneyText(batch.costCeilingUsd),
        batch.source,
        batch.metadata ? JSON.stringify(batch.metadata) : null,
        batch.inputFileId,
        batch.idempotencyKey,
      )
      const count = this.insertLines(batch.id, batch.lines)
      if (count !== batch.lineCount) {
        throw new Error(`batch ${batch.id}: ${count} lines given, ${batch.lineCount} declared`)
      }
      return { kind: 'created', batch: rowToBatch(this.q('SELECT * FROM batches WHERE id = ?').get(batch.id)!) }
    })
  }

  async recordRejectedBatch(batch: RejectedBatch) {
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
    return rowToBatch(this.q('SELECT * FROM batches WHERE id = ?').get(batch.id)!)
  }

  // ── retention ───────────────────────────────────────────────────────────────────────────

  async purgeResults(cutoff: number, limit: number, now: number) {
    return this.tx(() => {
      const ids = this.q(
        `SELECT id FROM batches WHERE finished_at < ? AND purged_at IS NULL ORDER BY finished_at LIMIT ?`,
      ).all(cutoff, limit).map((row) => row.id as string)
      for (const id of ids) {
        this.q('DELETE FROM lines WHERE batch_id = ?').run(id)
        this.q('DELETE FROM files WHERE batch_id = ?').run(id)
        this.q('UPDATE batches SET purged_at = ? WHERE id = ?').run(now, id)
      }
      return ids
    })
  }

  async deleteStaleUploads(cutoff: number, limit: number) {
    return this.q(
      `DELETE FROM files WHERE id IN (
         SELECT id FROM files WHERE kind = 'upload' AND last_used_at < ? LIMIT ?) RETURNING id`,
    ).all(cutoff, limit).map((row) => row.id as string)
  }

  // ── files ─────────────────────────────────────────────────────────────────────────────────

  async createFile(file: FileRecord) {
    this.q(
      `INSERT INTO files (id, account_id, purpose, filename, bytes, created_at, last_used_at, batch_id, kind)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ).run(file.id, file.accountId, file.purpose, file.filename, file.bytes, file.createdAt, file.lastUsedAt, file.batchId, file.kind)
  }

  async getFile(accountId: string, id: string) {
    const row = this.q(`${FILE_SELECT} WHERE f.id = ? AND f.account_id = ? AND ${VISIBLE_FILE}`).get(id, accountId)
    return row ? rowToFile(row) : null
  }

  async listFiles(accountId: string, page: { limit: number; after: string | null; purpose: string | null; order: 'asc' | 'desc' }) {
    const direction = page.order === 'asc' ? 'ASC' : 'DESC'
    const rows = this.q(
      `${FILE_SELECT} WHERE f.account_id = ? AND ${VISIBLE_FILE}
         AND (? IS NULL OR f.purpose = ?) AND (? IS NULL OR f.id ${page.order === 'asc' ? '>' : '<'} ?)
       ORDER BY f.id ${direction} LIMIT ?`,
    ).all(accountId, page.purpose, page.purpose, page.after, page.after, page.limit + 1)
    return { files: rows.slice(0, page.limit).map(rowToFile), hasMore: rows.length > page.limit }
  }

  async deleteFile(accountId: string, id: string) {
    return this.q('DELETE FROM files WHERE id = ? AND account_id = ?').run(id, accountId).changes > 0
  }

  async setFileBytes(id: string, bytes: number) {
    this.q('UPDATE files SET bytes = ? WHERE id = ?').run(bytes, id)
  }

  async touchFile(id: string, at: number) {
    this.q('UPDATE files SET last_used_at = ? WHERE id = ?').run(at, id)
  }

  /** Many rows per statement: one statement per line spent more time binding than writing. */
  private insertLines(batchId: string, lines: Iterable<NewLine>): number {
    const columns = 'INSERT INTO lines (batch_id, line_no, custom_id, input) VALUES '
    const many = this.q(columns + Array(ROWS_PER_INSERT).fill('(?, ?, ?, ?)').join(', '))
    const one = this.q(columns + '(?, ?, ?, ?)')
    const params: unknown[] = []
    let count = 0
    for (const line of lines) {
      params.push(batchId, line.lineNo, line.customId, line.input)
      count++
      if (params.length === ROWS_PER_INSERT * 4) {
        many.run(...params)
        params.length = 0
      }
    }
    for (let i = 0; i < params.length; i += 4) one.run(...params.slice(i, i + 4))
    return count
  }

  async findByIdempotencyKey(accountId: string, key: string) {
    const row = this.q('SELECT * FROM batches WHERE account_id = ? AND idempotency_key = ?').get(
      accountId,
      key,
    )
    return row ? rowToBatch(row) : null
  }

  async getBatch(accountId: string, id: string) {
    const row = this.q('SELECT * FROM batches WHERE id = ? AND account_id = ?').get(id, accountId)
    return row ? rowToBatch(row) : null
  }

  async listBatches(accountId: string, page: { limit: number; after: string | null }) {
    const rows = page.after
      ? this.q(
          'SELECT * FROM batches WHERE account_id = ? AND id < ? ORDER BY id DESC LIMIT ?',
        ).all(accountId, page.after, page.limit + 1)
      : this.q('SELECT * FROM batches WHERE account_id = ? ORDER BY id DESC LIMIT ?').all(
          accountId,
          page.limit + 1,
        )
    return { batches: rows.slice(0, page.limit).map(rowToBatch), hasMore: rows.length > page.limit }
  }

  async cancelBatch(accountId: string, id: string, now: number): Promise<CancelResult> {
    return this.tx((): CancelResult => {
      const row = this.q('SELECT * FROM batches WHERE id = ? AND account_id = ?').get(id, accountId)
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
      this.finish(id, now)
      return { kind: 'cancelled', batch: rowToBatch(this.q('SELECT * FROM batches WHERE id = ?').get(id)!) }
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

  // ── dispatch ──────────────────────────────────────────────────────────────────────────────

  async runnableBatches(nowMs: number, limit: number): Promise<RunnableBatch[]> {
    const rows = this.q(
      `SELECT id, account_id, deadline_at, endpoint, pending FROM batches
       WHERE status = 'in_progress' AND pending > 0 AND deadline_at > ?
       ORDER BY deadline_at, id LIMIT ?`,
    ).all(Math.floor(nowMs / 1000), limit)
    return rows.map(rowToRunnable)
  }

  async claimLines(
    batchId: string,
    owner: string,
    limit: number,
    nowMs: number,
    leaseUntilMs: number,
  ): Promise<ClaimedLine[]> {
    return this.tx(() => {
      const batch = this.q(
        `SELECT account_id, deadline_at FROM batches WHERE id = ? AND status = 'in_progress'`,
      ).get(batchId)
      if (!batch) return []
      const rows = this.q(
        `UPDATE lines SET status = 'running', lease_owner = ?, lease_until = ?, attempts = attempts + 1
         WHERE batch_id = ? AND line_no IN (
           SELECT line_no FROM lines WHERE batch_id = ? AND status = 'pending' AND not_before <= ?
           ORDER BY line_no LIMIT ?)
         RETURNING line_no, custom_id, input, attempts`,
      ).all(owner, leaseUntilMs, batchId, batchId, nowMs, limit)
      if (rows.length === 0) return []
      this.q(
        `UPDATE batches SET pending = pending - ?, running = running + ?,
           started_at = coalesce(started_at, ?) WHERE id = ?`,
      ).run(rows.length, rows.length, Math.floor(nowMs / 1000), batchId)
      rows.sort((a, b) => a.line_no - b.line_no)
      return rows.map((row) => ({
        batchId,
        accountId: batch.account_id,
        lineNo: Number(row.line_no),
        customId: row.custom_id,
        input: row.input,
        attempts: Number(row.attempts),
        deadlineAt: Number(batch.deadline_at),
      }))
    })
  }

  async batchStatuses(ids: readonly string[]) {
    const statuses: Record<string, BatchStatus> = {}
    if (ids.length === 0) return statuses
    const rows = this.q(`SELECT id, status FROM batches WHERE id IN (${ids.map(() => '?').join(', ')})`).all(...ids)
    for (const row of rows) statuses[row.id] = row.status
    return statuses
  }

  async renewLeases(owner: string, leaseUntilMs: number) {
    return this.q(
      `UPDATE lines SET lease_until = ? WHERE lease_owner = ? AND status = 'running'`,
    ).run(leaseUntilMs, owner).changes
  }

  async recordOutcomes(owner: string, outcomes: readonly LineOutcome[], nowMs: number) {
    if (outcomes.length === 0) return 0
    const now = Math.floor(nowMs / 1000)
    // One statement per line, its lease check in the WHERE clause; money and counters are summed
    // in memory and written once per batch and account at the end of the transaction.
    const retry = this.q(
      `UPDATE lines SET status = 'pending', lease_owner = NULL, lease_until = NULL, not_before = ?
       WHERE batch_id = ? AND line_no = ? AND status = 'running' AND lease_owner = ?`,
    )
    const succeed = this.q(
      `UPDATE lines SET status = 'succeeded', lease_owner = NULL, lease_until = NULL,
         response_status = ?, response = ?, cost_usd = ?, provider = ?, latency_ms = ?, finished_at = ?
       WHERE batch_id = ? AND line_no = ? AND status = 'running' AND lease_owner = ?`,
    )
    const fail = this.q(
      `UPDATE lines SET status = 'failed', lease_owner = NULL, lease_until = NULL,
         response_status = ?, error_code = ?, error_message = ?, error_upstream = ?,
         cost_usd = ?, provider = ?, latency_ms = ?, finished_at = ?
       WHERE batch_id = ? AND line_no = ? AND status = 'running' AND lease_owner = ?`,
    )
    return this.tx(() => {
      const ledger = new Ledger(this.db)
      let recorded = 0
      for (const outcome of outcomes) {
        const key = [outcome.batchId, outcome.lineNo, owner] as const
        if (outcome.kind === 'retry') {
          if (retry.run(outcome.notBefore, ...key).changes === 0) continue // lease lost
          ledger.count(outcome.batchId, 'retry')
          recorded++
          continue
        }
        // The charge is worked out first (it is what the line records), and only kept if the
        // line was still ours.
        const charge = ledger.charge(outcome.batchId, outcome.costUsd)
        const changed =
          outcome.kind === 'succeeded'
            ? succeed.run(outcome.responseStatus, outcome.response, charge.text, outcome.provider, outcome.latencyMs, now, ...key).changes
            : fail.run(
                outcome.responseStatus,
                outcome.error.code,
                outcome.error.message,
                outcome.error.upstream === undefined ? null : JSON.stringify(outcome.error.upstream),
                charge.text,
                outcome.provider,
                outcome.latencyMs,
                now,
                ...key,
              ).changes
        if (changed === 0) {
          charge.undo() // lease lost: another instance owns this line now, and it bills it
          continue
        }
        ledger.count(outcome.batchId, outcome.kind)
        recorded++
      }
      ledger.write()
      return recorded
    })
  }

  async releaseLeases(owner: string) {
    return this.tx(() => this.returnToPending('lease_owner = ?', [owner]))
  }

  async reapExpiredLeases(nowMs: number) {
    return this.tx(() => this.returnToPending('lease_until < ?', [nowMs]))
  }

  private returnToPending(where: string, params: unknown[]): number {
    // Through the small index of running lines: a plain GROUP BY here walked every line of every
    // batch (27 ms per call at 50,000 lines), on each maintenance tick.
    const rows = this.q(
      `SELECT batch_id, line_no FROM lines INDEXED BY lines_running WHERE status = 'running' AND ${where}`,
    ).all(...params)
    const reset = this.q(
      `UPDATE lines SET status = 'pending', lease_owner = NULL, lease_until = NULL
       WHERE batch_id = ? AND line_no = ? AND status = 'running'`,
    )
    const perBatch = new Map<string, number>()
    for (const row of rows) {
      if (reset.run(row.batch_id, row.line_no).changes === 0) continue
      perBatch.set(row.batch_id, (perBatch.get(row.batch_id) ?? 0) + 1)
    }
    const move = this.q('UPDATE batches SET running = running - ?, pending = pending + ? WHERE id = ?')
    for (const [batchId, n] of perBatch) move.run(n, n, batchId)
    return rows.length
  }

  async advanceBatches(now: number) {
    return this.tx(() => {
      const changed: string[] = []
      // Past the deadline: lines not yet run end `expired`; running ones may still finish.
      const overdue = this.q(
        `SELECT id FROM batches WHERE status IN ('in_progress', 'cancelling') AND deadline_at <= ? AND pending > 0`,
      ).all(now)
      for (const { id } of overdue) {
        const n = this.q(
          `UPDATE lines SET status = 'expired', error_code = 'batch_expired', finished_at = ?
           WHERE batch_id = ? AND status = 'pending'`,
        ).run(now, id).changes
        this.q('UPDATE batches SET pending = pending - ?, expired = expired + ? WHERE id = ?').run(
          n,
          n,
          id,
        )
      }
      // Lines handed back to a cancelling batch (a retry, an expired lease) end cancelled too.
      const cancelling = this.q(
        `SELECT id FROM batches WHERE status = 'cancelling' AND pending > 0`,
      ).all()
      for (const { id } of cancelling) {
        const n = this.q(
          `UPDATE lines SET status = 'cancelled', error_code = 'batch_cancelled', finished_at = ?
           WHERE batch_id = ? AND status = 'pending'`,
        ).run(now, id).changes
        this.q('UPDATE batches SET pending = pending - ?, cancelled = cancelled + ? WHERE id = ?').run(n, n, id)
      }
      // A batch is `finalizing` for one tick between its last line and its terminal status.
      for (const { id } of this.q(`SELECT id FROM batches WHERE status = 'finalizing'`).all()) {
        if (this.finish(id, now)) changed.push(id)
      }
      const idle = this.q(
        `SELECT id, status FROM batches WHERE status IN ('in_progress', 'cancelling')
           AND pending = 0 AND running = 0`,
      ).all()
      for (const { id, status } of idle) {
        if (status === 'cancelling') {
          if (this.finish(id, now)) changed.push(id)
        } else {
          this.q(`UPDATE batches SET status = 'finalizing', finalizing_at = ? WHERE id = ?`).run(now, id)
          changed.push(id)
        }
      }
      return changed
    })
  }

  /** Moves an idle batch to its terminal status and releases what is still held. */
  private finish(id: string, now: number): boolean {
    const row = this.q('SELECT * FROM batches WHERE id = ?').get(id)
    if (!row || row.pending !== 0 || row.running !== 0) return false
    if (!['in_progress', 'finalizing', 'cancelling'].includes(row.status)) return false
    const account = this.q('SELECT held_usd FROM accounts WHERE id = ?').get(row.account_id)!
    this.q('UPDATE accounts SET held_usd = ? WHERE id = ?').run(
      moneyText(Money.max(ZERO, new Money(account.held_usd).minus(row.held_usd))),
      row.account_id,
    )
    this.q(`UPDATE batches SET status = ?, finished_at = ?, held_usd = '0' WHERE id = ?`).run(
      terminalStatus(row as Parameters<typeof terminalStatus>[0]),
      now,
      id,
    )
    return true
  }
}

type Kind = 'succeeded' | 'failed' | 'retry'

/**
 * Money and counters of one recordOutcomes transaction, kept in memory and written once per
 * batch and account. A line is never charged more than its account's balance, and what it is
 * charged comes out of its batch's hold first (the hold is what admission reserved).
 */
class Ledger {
  private readonly batches = new Map<string, { accountId: string; cost: Money; held: Money; counts: Record<Kind, number> }>()
  private readonly accounts = new Map<string, { balance: Money; held: Money }>()

  constructor(private readonly db: Database) {}

  private batch(id: string) {
    let entry = this.batches.get(id)
    if (!entry) {
      const row = this.db.query<Row, [string]>('SELECT account_id, cost_usd, held_usd FROM batches WHERE id = ?').get(id)!
      entry = { accountId: row.account_id, cost: new Money(row.cost_usd), held: new Money(row.held_usd), counts: { succeeded: 0, failed: 0, retry: 0 } }
      this.batches.set(id, entry)
    }
    return entry
  }

  private account(id: string) {
    let entry = this.accounts.get(id)
    if (!entry) {
      const row = this.db.query<Row, [string]>('SELECT balance_usd, held_usd FROM accounts WHERE id = ?').get(id)!
      entry = { balance: new Money(row.balance_usd), held: new Money(row.held_usd) }
      this.accounts.set(id, entry)
    }
    return entry
  }

  count(batchId: string, kind: Kind) {
    this.batch(batchId).counts[kind]++
  }

  charge(batchId: string, costUsd: string): { text: string; undo: () => void } {
    const cost = new Money(costUsd)
    if (cost.isZero()) return { text: '0', undo: () => {} }
    const batch = this.batch(batchId)
    const account = this.account(batch.accountId)
    const charged = minMoney(cost, account.balance)
    const released = minMoney(charged, batch.held)
    account.balance = account.balance.minus(charged)
    account.held = account.held.minus(released)
    batch.cost = batch.cost.plus(charged)
    batch.held = batch.held.minus(released)
    return {
      text: moneyText(charged),
      undo: () => {
        account.balance = account.balance.plus(charged)
        account.held = account.held.plus(released)
        batch.cost = batch.cost.minus(charged)
        batch.held = batch.held.plus(released)
      },
    }
  }

  write() {
    const batchUpdate = this.db.query(
      `UPDATE batches SET cost_usd = ?, held_usd = ?, running = running - ?, pending = pending + ?,
         succeeded = succeeded + ?, failed = failed + ? WHERE id = ?`,
    )
    for (const [id, b] of this.batches) {
      const { succeeded, failed, retry } = b.counts
      batchUpdate.run(moneyText(b.cost), moneyText(b.held), succeeded + failed + retry, retry, succeeded, failed, id)
    }
    const accountUpdate = this.db.query('UPDATE accounts SET balance_usd = ?, held_usd = ? WHERE id = ?')
    for (const [id, a] of this.accounts) accountUpdate.run(moneyText(a.balance), moneyText(a.held), id)
  }
}
