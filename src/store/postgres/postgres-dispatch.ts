/**
 * The dispatcher's side of the shared store: claiming lines under leases, recording their
 * outcomes with their charges, reaping leases and moving batches on. Runs on any connection pool
 * to the database; in the gateway on a thread of its own (postgres-store.ts), so the driver's
 * work for thousands of lines a second (rows parsed, outcomes serialized) does not hold up the
 * event loop that reads upstream answers.
 */
import type postgres from 'postgres'
import {
  OPEN_BATCH_STATUSES,
  WAITING_CODES,
  type BatchStatus,
  type BatchWaiting,
  type WaitingCode,
} from '../../domain.ts'
import { Money, moneyText } from '../../money/decimal.ts'
import { capWaiting } from '../cap-waiting.ts'
import { rowToClaimedLine, rowToRunnable } from '../rows.ts'
import type {
  CallsChange,
  ClaimedLine,
  DispatchStore,
  LineOutcome,
  RunnableBatch,
} from '../store.ts'
import { advanceBatches } from './advance-batches.ts'
import { recordOutcomes } from './record-outcomes.ts'
import { returnToPending } from './return-to-pending.ts'

// Times are bigint columns, and callers' times may carry fractions (a jittered delay, a lease of
// 2.5 s): stored deadlines round up, "now" rounds down, so nothing happens sooner than asked.
const later = Math.ceil
const earlier = Math.floor

export class PostgresDispatch implements DispatchStore {
  constructor(private readonly sql: postgres.Sql) {}

  async runnableBatches(nowMs: number, limit: number): Promise<RunnableBatch[]> {
    // An account whose balance no longer covers its holds (a line cost more than its ceiling)
    // is not dispatched until a deposit covers them again; the claim checks it again below. A
    // batch held back by its cap is left out until a reserved ceiling ends (capRoomBack).
    const rows = await this.sql`
      SELECT b.id, b.account_id, b.created_at, b.deadline_at, b.endpoint, b.pending
      FROM batches b JOIN accounts a ON a.id = b.account_id
      WHERE b.status = 'in_progress' AND b.pending > 0 AND b.deadline_at > ${earlier(nowMs / 1000)}
        AND b.waiting_code IS DISTINCT FROM 'max_cost_reached'
        AND a.balance_usd >= a.held_usd
      ORDER BY b.deadline_at, b.id LIMIT ${limit}`
    return rows.map(rowToRunnable)
  }

  async claimLines(
    batchId: string,
    owner: string,
    limit: number,
    nowMs: number,
    leaseUntilMs: number,
  ): Promise<ClaimedLine[]> {
    const now = earlier(nowMs)
    const until = later(leaseUntilMs)
    // One statement, so one round trip, and the batch row is locked only while it runs: claims
    // and recorded results of a batch queue on that row, and a transaction of four round trips
    // held it four times as long. The batch row is locked first (lock order, and the counters
    // need it anyway): a cancel or expiry that committed before is seen, one running is waited
    // for. The pick is a CTE, not an `IN (subquery)`: a subquery with LIMIT and SKIP LOCKED may
    // be re-run by the planner for each outer row and then lock and return more than `limit`.
    //
    // A capped batch (max_cost_usd set) takes, among the picked lines whose ceiling fits in its
    // room on its own, the line-order prefix whose ceilings fit together; the room is read from
    // the locked batch row, so two instances' claims of it are checked one after the other.
    // Lines of an uncapped batch have no ceiling and pass both conditions as they are.
    const rows = await this.sql`
      WITH batch AS (
        SELECT account_id, deadline_at, max_cost_usd,
          max_cost_usd - cost_usd - reserved_usd AS room FROM batches b
        WHERE id = ${batchId} AND status = 'in_progress'
          AND EXISTS (SELECT 1 FROM accounts a WHERE a.id = b.account_id AND a.balance_usd >= a.held_usd)
        FOR UPDATE OF b),
      picked AS (
        SELECT line_no, ceiling_usd FROM lines
        WHERE batch_id = ${batchId} AND status = 'pending' AND not_before <= ${now}
          AND EXISTS (SELECT 1 FROM batch)
          AND (ceiling_usd IS NULL OR ceiling_usd <= (SELECT room FROM batch))
        ORDER BY line_no LIMIT ${limit}
        FOR UPDATE SKIP LOCKED),
      fitting AS (
        SELECT line_no FROM (
          SELECT line_no, sum(ceiling_usd) OVER (ORDER BY line_no) AS together FROM picked) p
        WHERE together IS NULL OR together <= (SELECT room FROM batch)),
      claimed AS (
        UPDATE lines l SET status = 'running', lease_owner = ${owner},
          lease_until = ${until}, attempts = l.attempts + 1
        FROM fitting WHERE l.batch_id = ${batchId} AND l.line_no = fitting.line_no
        RETURNING l.line_no, l.custom_id, l.input, l.attempts, l.ceiling_usd),
      counted AS (
        UPDATE batches SET pending = pending - n, running = running + n,
          reserved_usd = reserved_usd + c.reserved,
          started_at = coalesce(started_at, ${earlier(now / 1000)})
        FROM (SELECT count(*)::int AS n, coalesce(sum(ceiling_usd), 0) AS reserved FROM claimed) c
        WHERE id = ${batchId} AND c.n > 0)
      SELECT claimed.*, batch.account_id, batch.deadline_at, batch.max_cost_usd, batch.room
      FROM batch LEFT JOIN claimed ON true`
    const claimed = rows
      .filter((row) => row.line_no !== null)
      .map((row) => rowToClaimedLine(batchId, row, row))
      .sort((a, b) => a.lineNo - b.lineNo)
    const batch = rows[0]
    if (batch && batch.max_cost_usd !== null)
      await this.noteCap(batchId, batch, claimed, limit, now)
    return claimed
  }

  /**
   * After a capped claim: waiting `max_cost_reached` when a due line is left that no longer fits,
   * cleared when lines were taken and none is held back (the cap's own code only).
   */
  private async noteCap(
    batchId: string,
    batch: Record<string, any>,
    claimed: ClaimedLine[],
    limit: number,
    now: number,
  ) {
    const room = claimed.reduce(
      (left, line) => left.minus(line.ceilingUsd ?? 0),
      new Money(batch.room as string),
    )
    let blocked = false
    if (claimed.length < limit) {
      const [dearest] = await this.sql`
        SELECT 1 FROM lines WHERE batch_id = ${batchId} AND status = 'pending'
          AND not_before <= ${now} AND ceiling_usd > ${moneyText(room)}::numeric LIMIT 1`
      blocked = dearest !== undefined
    }
    if (!blocked && claimed.length === 0) return
    const waiting = blocked ? capWaiting(moneyText(batch.max_cost_usd)) : null
    await this.sql`
      UPDATE batches SET waiting_code = ${waiting?.code ?? null},
        waiting_message = ${waiting?.message ?? null}, waiting_until = NULL
      WHERE id = ${batchId} AND (waiting_code IS NULL OR waiting_code = 'max_cost_reached')
        AND (waiting_code IS DISTINCT FROM ${waiting?.code ?? null}::text
          OR waiting_message IS DISTINCT FROM ${waiting?.message ?? null}::text)`
  }

  async batchStatuses(ids: readonly string[]) {
    const statuses: Record<string, BatchStatus> = {}
    if (ids.length === 0) return statuses
    const rows = await this.sql`SELECT id, status FROM batches WHERE id = ANY(${[...ids]}::text[])`
    for (const row of rows) statuses[row.id] = row.status
    return statuses
  }

  async renewLeases(owner: string, leaseUntilMs: number) {
    // Rows are locked in key order, as recordOutcomes locks them, so the two cannot deadlock.
    const result = await this.sql`
      WITH leased AS (
        SELECT batch_id, line_no FROM lines WHERE lease_owner = ${owner} AND status = 'running'
        ORDER BY batch_id, line_no FOR UPDATE)
      UPDATE lines l SET lease_until = ${later(leaseUntilMs)}
      FROM leased WHERE l.batch_id = leased.batch_id AND l.line_no = leased.line_no`
    return result.count
  }

  async recordOutcomes(
    owner: string,
    outcomes: readonly LineOutcome[],
    nowMs: number,
    calls: readonly CallsChange[] = [],
  ) {
    if (outcomes.length === 0 && calls.length === 0) return 0
    return this.sql.begin((tx) => recordOutcomes(tx, owner, outcomes, nowMs, calls))
  }

  async releaseLeases(owner: string) {
    return this.sql.begin((tx) => returnToPending(tx, tx`lease_owner = ${owner}`))
  }

  async reapExpiredLeases(nowMs: number) {
    return this.sql.begin((tx) => returnToPending(tx, tx`lease_until < ${later(nowMs)}`))
  }

  async recordEtas(etas: readonly { batchId: string; eta: number | null }[]) {
    if (etas.length === 0) return
    await this.sql`
      UPDATE batches b SET eta = e.eta
      FROM unnest(${etas.map((e) => e.batchId)}::text[],
                  ${etas.map((e) => (e.eta === null ? null : Math.ceil(e.eta)))}::bigint[]) AS e (id, eta)
      WHERE b.id = e.id AND b.status IN ('in_progress', 'cancelling')
        AND b.eta IS DISTINCT FROM e.eta`
  }

  async advanceBatches(now: number) {
    return this.sql.begin((tx) => advanceBatches(tx, earlier(now)))
  }

  async setWaiting(
    batchId: string,
    waiting: BatchWaiting | null,
    replaces: readonly WaitingCode[] = WAITING_CODES,
  ) {
    const code = waiting?.code ?? null
    const message = waiting?.message ?? null
    const until = waiting?.until ?? null
    const result = await this.sql`
      UPDATE batches SET waiting_code = ${code}, waiting_message = ${message},
        waiting_until = ${until}
      WHERE id = ${batchId} AND status = ANY(${[...OPEN_BATCH_STATUSES]}::text[])
        AND (waiting_code IS NULL OR waiting_code = ANY(${[...replaces]}::text[]))
        AND (waiting_code IS DISTINCT FROM ${code}::text
          OR waiting_message IS DISTINCT FROM ${message}::text
          OR waiting_until IS DISTINCT FROM ${until}::bigint)`
    return result.count > 0
  }
}
