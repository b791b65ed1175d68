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
 * The roles with a folder of their own (src/store/<role>/) are set on the store by its constructor
 * (postgresRoles); this class keeps the batch calls, and the bigger pieces live beside it:
 * postgres-dispatch (the dispatcher's calls, run on a thread of their own), copy-lines.
 */
import { createPostgresChunkStore } from '../batch-chunks/postgres-chunks.ts'
import { progressJoin } from '../dispatch/postgres-batch-progress.ts'
import type postgres from 'postgres'
import { OPEN_BATCH_STATUSES, type LineStatus } from '../../domain.ts'
import { batchHold, Money, moneyText, ZERO } from '../../money/decimal.ts'
import { rowToBatch, rowToLine, rowsToShares, withProgress } from '../rows.ts'
import type {
  AdmitResult,
  CancelResult,
  NewBatch,
  OpenedStore,
  RejectedBatch,
  RoleStores,
  Store,
} from '../store.ts'
import { createDispatchThread, type DispatchThread } from '../dispatch/dispatch-thread.ts'
import { finishBatches } from '../dispatch/postgres-advance-batches.ts'
import { connectPostgres, type PostgresConnection } from './connect.ts'
import { copyLines } from '../batches/postgres-copy-lines.ts'
import { createPostgresFileStore } from '../files/postgres-files.ts'
import { creditWaitColumns } from '../credit/daily-spend.ts'
import * as creditWaits from '../batches/postgres-credit-waits.ts'
import { failUnstartedBatches } from '../batches/postgres-start-in-time.ts'
import { createPostgresCreditStore } from '../credit/postgres-credit.ts'
import { migrate } from './migrate.ts'
import * as retention from '../batches/postgres-delete-ended-batch.ts'
import { createPostgresRetentionStore } from '../retention/postgres-retention.ts'
import { createPostgresUsageStore } from '../usage/postgres-usage.ts'
import { createPostgresAccountStore } from '../accounts/postgres-accounts.ts'
import { createPostgresFineTuneStore } from '../fine-tunes/postgres-fine-tunes.ts'
import * as webhooks from '../webhooks/postgres-webhooks.ts'
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
  const dispatch = createDispatchThread(
    new URL('../dispatch/postgres-dispatch-worker.ts', import.meta.url),
    [connection],
  )
  const store = new PostgresStore(sql, dispatch, options.collectGarbage)
  return { store, dispatch, chunks: createPostgresChunkStore(sql) }
}

const OPEN_STATUSES = [...OPEN_BATCH_STATUSES]

// Times are bigint columns, and callers' times may carry fractions: "now" rounds down, so nothing
// happens sooner than asked (postgres-dispatch.ts rounds stored deadlines up).
const earlier = Math.floor

/** The roles' calls (src/store/<role>/), each given the connection only. */
const postgresRoles = (sql: postgres.Sql): RoleStores => ({
  ...createPostgresAccountStore(sql),
  ...createPostgresCreditStore(sql),
  ...createPostgresFileStore(sql),
  ...createPostgresRetentionStore(sql),
  ...createPostgresUsageStore(sql),
  ...createPostgresFineTuneStore(sql),
  ...webhooks.createPostgresWebhookStore(sql),
})

// The roles' calls are set on the store by its constructor (postgresRoles).
interface PostgresStore extends RoleStores {}

/** Everything but the dispatcher's calls (postgres-dispatch.ts); it closes their thread. */
class PostgresStore implements Store {
  readonly kind = 'postgres' as const
  constructor(
    private readonly sql: postgres.Sql,
    private readonly dispatchThread: DispatchThread,
    private readonly collectGarbage?: () => void,
  ) {
    Object.assign(this, postgresRoles(sql))
  }

  async ping() {
    await this.sql`SELECT 1`
  }

  failUnstartedBatches(nowMs: number) {
    return failUnstartedBatches(this.sql, Math.floor(nowMs / 1000))
  }

  deleteEndedBatch(accountId: string, id: string) {
    return retention.deleteEndedBatch(this.sql, accountId, id)
  }

  async close() {
    await this.dispatchThread.close()
    await this.sql.end({ timeout: 5 })
  }

  // ── batches waiting for credit (credit-waits.ts) and starting in time (start-in-time.ts) ──

  admitWaitingBatches(nowMs: number) {
    return creditWaits.admitWaitingBatches(this.sql, nowMs)
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
}
