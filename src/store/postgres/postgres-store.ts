/**
 * The shared store on PostgreSQL (`postgres`, porsager), for several gateway instances on one
 * database. Semantics are the embedded store's (src/store/sqlite/sqlite-store.ts); what differs
 * is how races between instances are kept out:
 * - admission locks the account row (`FOR UPDATE`), so the open-batch limit and the credit hold
 *   hold across instances;
 * - every transaction that changes lines locks their batch first, then the lines, then accounts
 *   (see sql/0001_init.sql), so counters stay exact and instances never deadlock;
 * - claiming is one `UPDATE` of the lines a `SELECT … FOR UPDATE SKIP LOCKED` picked; the
 *   advancer skips batches another instance is working on.
 * Money stays `numeric` in SQL and decimal strings in code; bigint columns come back as strings
 * and are turned into numbers by rows.ts.
 *
 * Past 400 lines (about 590) because it still implements the whole Store interface in one class;
 * the bigger pieces live beside it: postgres-dispatch (the dispatcher's calls, run on a thread of
 * their own), copy-lines, files, webhooks. Splitting the store by role is the open structural work.
 */
import { createPostgresChunkStore } from '../batch-chunks/postgres-chunks.ts'
import { progressJoin } from './batch-progress.ts'
import type postgres from 'postgres'
import { OPEN_BATCH_STATUSES, type LineStatus } from '../../domain.ts'
import { batchHold, Money, moneyText, ZERO } from '../../money/decimal.ts'
import {
  rowToAccount,
  rowToBatch,
  rowToCaller,
  rowToKey,
  rowToLine,
  rowsToShares,
  withProgress,
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
  NewAccount,
  NewBatch,
  NewKey,
  FileRecord,
  OpenedStore,
  RejectedBatch,
  Store,
  DeliveryResult,
  WebhookRecord,
  UsageAddition,
} from '../store.ts'
import { createDispatchThread, type DispatchThread } from '../dispatch-thread.ts'
import { finishBatches } from './advance-batches.ts'
import { connectPostgres, type PostgresConnection } from './connect.ts'
import { copyLines } from './copy-lines.ts'
import * as files from './files.ts'
import { creditWaitColumns } from '../daily-spend.ts'
import * as creditWaits from './credit-waits.ts'
import { failUnstartedBatches } from './start-in-time.ts'
import * as liveCredit from './live-credit.ts'
import { migrate } from './migrate.ts'
import * as retention from './retention.ts'
import * as sessions from './sessions.ts'
import * as usage from './usage.ts'
import * as adapters from './adapters.ts'
import * as uploads from './uploads.ts'
import * as webhooks from './webhooks.ts'
import { storableJson } from './storable.ts'

type Db = postgres.ISql

export interface PostgresStoreOptions {
  /** A schema of its own (created and migrated if missing), e.g. one per test file. */
  schema?: string
  /** Pool size; default 10. */
  max?: number
  /** Called every few megabytes of a batch's COPY data (see copyLines). */
  collectGarbage?: () => void
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/

/** The dispatch thread's pool: claims, recorded outcomes and maintenance, a few at a time. */
const DISPATCH_CONNECTIONS = 4

/**
 * Connects, applies pending migrations, and returns the store and, apart, the dispatcher's calls,
 * which run on a thread of their own with a pool of their own (postgres-dispatch.ts). Closing
 * the store closes that thread too.
 */
export async function createPostgresStore(
  url: string,
  options: PostgresStoreOptions = {},
): Promise<OpenedStore> {
  const { schema } = options
  if (schema !== undefined && !SCHEMA_NAME.test(schema)) {
    throw new Error(`schema ${JSON.stringify(schema)}: use lower-case letters, digits and _`)
  }
  const sql = connectPostgres({ url, schema, max: options.max ?? 10 })
  try {
    await migrate(sql, { schema })
  } catch (error) {
    await sql.end({ timeout: 1 })
    throw error
  }
  const connection: PostgresConnection = { url, schema, max: DISPATCH_CONNECTIONS }
  const dispatch = createDispatchThread(new URL('./dispatch-worker.ts', import.meta.url), [
    connection,
  ])
  const store = new PostgresStore(sql, dispatch, options.collectGarbage)
  return { store, dispatch, chunks: createPostgresChunkStore(sql) }
}

const OPEN_STATUSES = [...OPEN_BATCH_STATUSES]

// Times are bigint columns, and callers' times may carry fractions: "now" rounds down, so nothing
// happens sooner than asked (postgres-dispatch.ts rounds stored deadlines up).
const earlier = Math.floor

async function accountView(db: Db, id: string): Promise<AccountView | null> {
  // Live leases are holds too: held_usd shows them, so available_usd is what may still be spent.
  const [row] = await db`
    SELECT a.id, a.name, a.balance_usd, a.max_open_batches, a.rate_limit_per_minute, a.created_at,
      a.held_usd + (SELECT coalesce(sum(l.amount_usd), 0) FROM credit_leases l
                    WHERE l.account_id = a.id AND l.expires_at_ms > ${Date.now()}) AS held_usd,
      (SELECT count(*) FROM batches b
       WHERE b.account_id = a.id AND b.status = ANY(${OPEN_STATUSES}::text[])) AS open_batches
    FROM accounts a WHERE a.id = ${id}`
  return row ? { ...rowToAccount(row), openBatches: Number(row.open_batches) } : null
}

/** Everything but the dispatcher's calls (postgres-dispatch.ts); it closes their thread. */
class PostgresStore implements Store {
  readonly kind = 'postgres' as const
  constructor(
    private readonly sql: postgres.Sql,
    private readonly dispatchThread: DispatchThread,
    private readonly collectGarbage?: () => void,
  ) {}

  async ping() {
    await this.sql`SELECT 1`
  }

  failUnstartedBatches(nowMs: number) {
    return failUnstartedBatches(this.sql, Math.floor(nowMs / 1000))
  }

  deleteEndedBatch(accountId: string, id: string) {
    return retention.deleteEndedBatch(this.sql, accountId, id)
  }

  purgeResults(cutoff: number, limit: number, now: number) {
    return retention.purgeResults(this.sql, cutoff, limit, now)
  }

  deleteStaleUploads(cutoff: number, limit: number) {
    return retention.deleteStaleUploads(this.sql, cutoff, limit)
  }

  async close() {
    await this.dispatchThread.close()
    await this.sql.end({ timeout: 5 })
  }

  // ── accounts and keys ─────────────────────────────────────────────────────────────────────

  async createAccount(account: NewAccount) {
    await this.sql`
      INSERT INTO accounts (id, name, balance_usd, held_usd, max_open_batches,
        rate_limit_per_minute, created_at)
      VALUES (${account.id}, ${account.name}, ${moneyText(account.creditUsd)}::numeric, 0,
        ${account.maxOpenBatches}, ${account.rateLimitPerMinute}, ${account.createdAt})`
    return (await accountView(this.sql, account.id))!
  }

  async getAccount(id: string) {
    return accountView(this.sql, id)
  }

  async hasAccounts() {
    const rows = await this.sql`SELECT 1 FROM accounts LIMIT 1`
    return rows.length > 0
  }

  // ── usage (usage.ts) ──────────────────────────────────────────────────────────────────────

  async addUsage(rows: readonly UsageAddition[]) {
    await usage.addUsage(this.sql, rows)
  }

  async usageRows(accountId: string, fromDay: string, toDay: string) {
    return usage.usageRows(this.sql, accountId, fromDay, toDay)
  }

  async addCredit(id: string, amountUsd: string) {
    const [row] = await this.sql`
      UPDATE accounts SET balance_usd = GREATEST(0, balance_usd + ${moneyText(amountUsd)}::numeric)
      WHERE id = ${id} RETURNING id`
    return row ? accountView(this.sql, id) : null
  }

  async createKey(key: NewKey) {
    const [row] = await this.sql`
      INSERT INTO api_keys (id, account_id, hash, prefix, name, scopes, rate_limit_per_minute,
        created_at)
      SELECT ${key.id}, ${key.accountId}, ${key.hash}, ${key.prefix}, ${key.name},
        ${key.scopes.join(',')}, ${key.rateLimitPerMinute}::int, ${key.createdAt}
      WHERE EXISTS (SELECT 1 FROM accounts WHERE id = ${key.accountId})
      RETURNING *`
    return row ? rowToKey(row) : null
  }

  async revokeKey(id: string, at: number) {
    // The key's dashboard sessions end with it (they are refused anyway once it is revoked).
    const [row] = await this.sql`
      WITH revoked AS (
        UPDATE api_keys SET revoked_at = coalesce(revoked_at, ${earlier(at)}) WHERE id = ${id}
        RETURNING *),
      ended AS (DELETE FROM dashboard_sessions WHERE key_id = ${id})
      SELECT * FROM revoked`
    return row ? rowToKey(row) : null
  }

  // ── live credit (docs/live.md): live-credit.ts ────────────────────────────────────────────────

  takeLiveCredit(request: Parameters<Store['takeLiveCredit']>[0]) {
    return liveCredit.takeLiveCredit(this.sql, request)
  }

  renewLiveCredit(
    instanceId: string,
    accountIds: readonly string[],
    nowMs: number,
    expiresAtMs: number,
  ) {
    return liveCredit.renewLiveCredit(this.sql, instanceId, accountIds, nowMs, expiresAtMs)
  }

  writeLiveCharges(group: Parameters<Store['writeLiveCharges']>[0]) {
    return liveCredit.writeLiveCharges(this.sql, group)
  }

  async dropLiveCredit(instanceId: string) {
    await this.sql`DELETE FROM credit_leases WHERE instance_id = ${instanceId}`
  }

  // ── daily spend limit and batches waiting for credit (docs/money-and-limits.md, docs/open-models.md): credit-waits.ts ────

  getDailySpend(accountId: string, nowMs: number) {
    return creditWaits.getDailySpend(this.sql, accountId, nowMs)
  }

  async setDailySpendLimit(accountId: string, limitUsd: string | null) {
    const rows = await this.sql`
      UPDATE accounts SET daily_spend_limit_usd = ${limitUsd === null ? null : moneyText(limitUsd)}::numeric
      WHERE id = ${accountId} RETURNING id`
    return rows.length > 0
  }

  admitWaitingBatches(nowMs: number) {
    return creditWaits.admitWaitingBatches(this.sql, nowMs)
  }

  /** One round trip: this runs on every authenticated request. */
  async findKey(hash: string) {
    const [row] = await this.sql`
      SELECT k.*, a.name AS account_name, a.balance_usd, a.held_usd, a.max_open_batches,
        a.rate_limit_per_minute AS account_rate_limit_per_minute,
        a.created_at AS account_created_at
      FROM api_keys k JOIN accounts a ON a.id = k.account_id
      WHERE k.hash = ${hash} AND k.revoked_at IS NULL`
    return row ? rowToCaller(row) : null
  }

  // ── batches ───────────────────────────────────────────────────────────────────────────────

  async admitBatch(batch: NewBatch): Promise<AdmitResult> {
    const ceiling = moneyText(batch.costCeilingUsd)
    const hold = batchHold(ceiling, batch.maxCostUsd)
    const cap = batch.maxCostUsd ? moneyText(batch.maxCostUsd) : null
    return this.sql.begin(async (tx): Promise<AdmitResult> => {
      // The account lock comes first: the checks below then see every batch another instance
      // admitted before us, and no other admission for this account runs until we commit.
      const [account] = await tx`SELECT * FROM accounts WHERE id = ${batch.accountId} FOR UPDATE`
      if (!account) throw new Error(`account ${batch.accountId} vanished during admission`)
      if (batch.idempotencyKey) {
        const [existing] = await tx`
          SELECT b.*, p.* FROM batches b ${progressJoin(tx)}
          WHERE account_id = ${batch.accountId} AND idempotency_key = ${batch.idempotencyKey}`
        if (existing) return { kind: 'duplicate', batch: rowToBatch(existing) }
      }
      const [open] = await tx`
        SELECT count(*) AS n FROM batches
        WHERE account_id = ${batch.accountId} AND status = ANY(${OPEN_STATUSES}::text[])`
      const inUse = Number(open!.n)
      const limit = Number(account.max_open_batches)
      if (inUse >= limit) return { kind: 'limit_exceeded', limit, inUse }
      // Live leases of every instance count as held; expired ones count for nothing.
      const [leased] = await tx`
        SELECT coalesce(sum(amount_usd), 0) AS total FROM credit_leases
        WHERE account_id = ${batch.accountId} AND expires_at_ms > ${Date.now()}`
      // The daily limit before the credit: a deposit does not raise it, so no wait helps.
      if (account.daily_spend_limit_usd !== null) {
        const used = await creditWaits.dailyUsed(tx, account, batch.createdAt * 1000)
        if (used.plus(hold).greaterThan(account.daily_spend_limit_usd)) {
          return {
            kind: 'daily_limit_exceeded',
            limitUsd: moneyText(account.daily_spend_limit_usd),
            usedUsd: moneyText(used),
          }
        }
      }
      const available = new Money(account.balance_usd).minus(account.held_usd).minus(leased!.total)
      const waitUntil = batch.creditWaitUntil ?? null
      // A batch that may wait queues behind the account's batches already waiting.
      const ahead = waitUntil === null ? [] : await creditWaits.waitingHolds(tx, batch.accountId)
      const waits = available.lessThan(hold) || ahead.length > 0
      if (waits && waitUntil === null) {
        return { kind: 'insufficient_quota', availableUsd: moneyText(Money.max(available, ZERO)) }
      }
      if (!waits) {
        await tx`
          UPDATE accounts SET held_usd = held_usd + ${hold}::numeric WHERE id = ${batch.accountId}`
      }
      const wait = waits
        ? creditWaitColumns(hold, ahead, available, waitUntil!)
        : { code: null, message: null, until: null }
      const [row] = await tx`
        INSERT INTO batches (id, account_id, name, endpoint, status, completion_window_hours,
          created_at, deadline_at, line_count, pending, cost_ceiling_usd, held_usd, source,
          metadata, input_file_id, idempotency_key, waiting_code, waiting_message, waiting_until,
          max_cost_usd, parent_batch_id)
        VALUES (${batch.id}, ${batch.accountId}, ${batch.name}, ${batch.endpoint},
          ${waits ? 'validating' : 'in_progress'},
          ${batch.completionWindowHours}, ${batch.createdAt}, ${batch.deadlineAt},
          ${batch.lineCount}, ${batch.lineCount}, ${ceiling}::numeric,
          ${waits ? '0' : hold}::numeric,
          ${batch.source}, ${batch.metadata ? tx.json(storableJson(batch.metadata)) : null},
          ${batch.inputFileId}, ${batch.idempotencyKey}, ${wait.code}, ${wait.message},
          ${wait.until}, ${cap}::numeric, ${batch.parentBatchId ?? null})
        RETURNING *`
      const count = await copyLines(tx, batch.id, batch.lines, this.collectGarbage, cap !== null)
      if (count !== batch.lineCount) {
        throw new Error(`batch ${batch.id}: ${count} lines given, ${batch.lineCount} declared`)
      }
      if (batch.parentBatchId) {
        // The parent has ended (the caller checked), so no dispatch transaction holds its row:
        // locking it after the account cannot close a cycle with one that locks batch, then account.
        const [parent] = await tx`
          UPDATE batches
          SET retried_by = coalesce(retried_by, '[]'::jsonb) || jsonb_build_array(${batch.id}::text)
          WHERE id = ${batch.parentBatchId} AND account_id = ${batch.accountId}
          RETURNING id`
        if (!parent) throw new Error(`batch ${batch.id}: parent ${batch.parentBatchId} not found`)
      }
      return { kind: 'created', batch: rowToBatch(row!) }
    })
  }

  async recordRejectedBatch(batch: RejectedBatch) {
    return this.sql.begin(async (tx) => {
      const [row] = await tx`
      INSERT INTO batches (id, account_id, name, endpoint, status, completion_window_hours,
        created_at, deadline_at, finished_at, line_count, pending, cost_ceiling_usd, held_usd,
        source, metadata, input_file_id, errors)
      VALUES (${batch.id}, ${batch.accountId}, ${batch.name}, ${batch.endpoint}, 'failed',
        ${batch.completionWindowHours}, ${batch.createdAt},
        ${batch.createdAt + batch.completionWindowHours * 3600}, ${batch.createdAt}, 0, 0, 0, 0,
        ${batch.source}, ${batch.metadata ? this.sql.json(storableJson(batch.metadata)) : null},
        ${batch.inputFileId}, ${this.sql.json(storableJson(batch.errors))})
      RETURNING *`
      // Failed at once: its webhooks hear of it like any other failed batch.
      await webhooks.enqueueWebhookEvents(
        tx,
        [{ id: batch.id, accountId: batch.accountId, status: 'failed' }],
        batch.createdAt,
      )
      return rowToBatch(row!)
    })
  }

  async findByIdempotencyKey(accountId: string, key: string) {
    const [row] = await this.sql`
      SELECT b.*, p.* FROM batches b ${progressJoin(this.sql)}
      WHERE account_id = ${accountId} AND idempotency_key = ${key}`
    return row ? rowToBatch(row) : null
  }

  async getBatch(accountId: string, id: string) {
    const [row] = await this.sql`
      SELECT b.*, p.* FROM batches b ${progressJoin(this.sql)}
      WHERE id = ${id} AND account_id = ${accountId}`
    return row ? rowToBatch(row) : null
  }

  async providerShares(batchIds: readonly string[]) {
    if (batchIds.length === 0) return new Map()
    const rows = await this.sql`
      SELECT * FROM batch_providers WHERE batch_id = ANY(${[...batchIds]}::text[])`
    return rowsToShares(rows)
  }

  async listBatches(accountId: string, page: { limit: number; after: string | null }) {
    const after = page.after ? this.sql`AND id < ${page.after}` : this.sql``
    const rows = await this.sql`
      SELECT b.*, p.* FROM batches b ${progressJoin(this.sql)}
      WHERE account_id = ${accountId} ${after}
      ORDER BY id DESC LIMIT ${page.limit + 1}`
    return { batches: rows.slice(0, page.limit).map(rowToBatch), hasMore: rows.length > page.limit }
  }

  async cancelBatch(accountId: string, id: string, at: number): Promise<CancelResult> {
    const now = earlier(at)
    return this.sql.begin(async (tx): Promise<CancelResult> => {
      const [row] = await tx`
        SELECT b.*, p.* FROM batches b ${progressJoin(tx)}
        WHERE id = ${id} AND account_id = ${accountId} FOR UPDATE OF b`
      if (!row) return { kind: 'not_found' }
      if (row.status === 'cancelling') return { kind: 'cancelled', batch: rowToBatch(row) }
      if (row.status !== 'in_progress' && row.status !== 'validating') {
        return { kind: 'conflict', batch: rowToBatch(row) }
      }
      await tx`
        WITH cancelled AS (
          UPDATE lines SET status = 'cancelled', error_code = 'batch_cancelled',
            finished_at = ${now}
          WHERE batch_id = ${id} AND status = 'pending'
          RETURNING 1)
        UPDATE batches SET status = 'cancelling', cancel_requested_at = ${now},
          pending = pending - (SELECT count(*) FROM cancelled),
          cancelled = cancelled + (SELECT count(*) FROM cancelled)
        WHERE id = ${id}
        RETURNING id`
      // Claims do not lock the row: the counters are read again once the pending lines are
      // ended, in a snapshot that holds any claim that took a line first.
      const [cancelling] = await tx`
        SELECT b.*, p.* FROM batches b ${progressJoin(tx)} WHERE id = ${id}`
      await finishBatches(tx, [withProgress(cancelling!)], now)
      const [latest] = await tx`SELECT b.*, p.* FROM batches b ${progressJoin(tx)} WHERE id = ${id}`
      return { kind: 'cancelled', batch: rowToBatch(latest!) }
    })
  }

  async readLines(
    batchId: string,
    query: { afterLineNo: number; limit: number; statuses: readonly LineStatus[] | null },
  ) {
    const filter = query.statuses
      ? this.sql`AND status = ANY(${[...query.statuses]}::text[])`
      : this.sql``
    const rows = await this.sql`
      SELECT * FROM lines WHERE batch_id = ${batchId} AND line_no > ${query.afterLineNo} ${filter}
      ORDER BY line_no LIMIT ${query.limit}`
    return rows.map(rowToLine)
  }

  // ── file quotas, uploads in progress (uploads.ts), dashboard sessions (sessions.ts) ──────

  reserveUpload(upload: NewUpload, defaults: FileQuotaDefaults) {
    return uploads.reserveUpload(this.sql, upload, defaults)
  }

  growUpload(
    fileId: string,
    need: number,
    want: number,
    nowMs: number,
    defaults: FileQuotaDefaults,
  ) {
    return uploads.growUpload(this.sql, fileId, need, want, nowMs, defaults)
  }

  commitUpload(file: FileRecord) {
    return uploads.commitUpload(this.sql, file)
  }

  releaseUpload(fileId: string) {
    return uploads.releaseUpload(this.sql, fileId)
  }

  expireUploads(staleBeforeMs: number, limit: number) {
    return uploads.expireUploads(this.sql, staleBeforeMs, limit)
  }

  knownFileIds(ids: readonly string[]) {
    return uploads.knownFileIds(this.sql, ids)
  }

  getFileQuota(accountId: string) {
    return uploads.getFileQuota(this.sql, accountId)
  }

  setFileQuota(accountId: string, limits: FileLimits) {
    return uploads.setFileQuota(this.sql, accountId, limits)
  }

  // ── fine-tuned adapters (docs/open-models.md): adapters.ts ─────────────────────────────────────────

  createAdapter(adapter: NewAdapter) {
    return adapters.createAdapter(this.sql, adapter)
  }

  getAdapter(id: string) {
    return adapters.getAdapter(this.sql, id)
  }

  listAdapters(accountId: string, options: { activeOnly?: boolean } = {}) {
    return adapters.listAdapters(this.sql, accountId, options.activeOnly ?? false)
  }

  deactivateAdapter(id: string, at: number) {
    return adapters.deactivateAdapter(this.sql, id, at)
  }

  createSession(session: NewSession) {
    return sessions.createSession(this.sql, session)
  }

  findSession(hash: string, now: number) {
    return sessions.findSession(this.sql, hash, now)
  }

  deleteSession(hash: string) {
    return sessions.deleteSession(this.sql, hash)
  }

  deleteExpiredSessions(now: number) {
    return sessions.deleteExpiredSessions(this.sql, now)
  }

  // ── webhooks and their outbox (webhooks.ts) ──────────────────────────────────────────────

  createWebhook(webhook: WebhookRecord, maxPerAccount: number) {
    return webhooks.createWebhook(this.sql, webhook, maxPerAccount)
  }

  listWebhooks(accountId: string) {
    return webhooks.listWebhooks(this.sql, accountId)
  }

  deleteWebhook(accountId: string, id: string) {
    return webhooks.deleteWebhook(this.sql, accountId, id)
  }

  listDeliveries(
    accountId: string,
    webhookId: string,
    page: { limit: number; after: string | null },
  ) {
    return webhooks.listDeliveries(this.sql, accountId, webhookId, page)
  }

  claimDeliveries(owner: string, limit: number, nowMs: number, leaseUntilMs: number) {
    return webhooks.claimDeliveries(this.sql, owner, limit, nowMs, leaseUntilMs)
  }

  finishDelivery(
    owner: string,
    delivery: { webhookId: string; eventId: string },
    result: DeliveryResult,
    nowMs: number,
    disableAfterMs?: number,
  ) {
    return webhooks.finishDelivery(this.sql, owner, delivery, result, nowMs, disableAfterMs)
  }

  enableWebhook(accountId: string, id: string) {
    return webhooks.enableWebhook(this.sql, accountId, id)
  }

  releaseDeliveries(owner: string, nowMs: number) {
    return webhooks.releaseDeliveries(this.sql, owner, nowMs)
  }

  // ── files ─────────────────────────────────────────────────────────────────────────────────

  createFile(file: FileRecord) {
    return files.createFile(this.sql, file)
  }

  getFile(accountId: string, id: string) {
    return files.getFile(this.sql, accountId, id)
  }

  listFiles(accountId: string, page: Parameters<Store['listFiles']>[1]) {
    return files.listFiles(this.sql, accountId, page)
  }

  deleteFile(accountId: string, id: string) {
    return files.deleteFile(this.sql, accountId, id)
  }

  setFileBytes(id: string, bytes: number) {
    return files.setFileBytes(this.sql, id, bytes)
  }

  touchFile(id: string, at: number) {
    return files.touchFile(this.sql, id, at)
  }
}
