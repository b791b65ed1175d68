/**
 * The dispatcher's side of the embedded store: claiming lines under leases, recording their
 * outcomes with their charges, reaping leases and moving batches on. Works on any connection to
 * the store's file; for a file on disk it runs on a thread of its own (dispatch-thread.ts), so
 * its SQLite work does not hold up the event loop that reads upstream answers.
 *
 * Longer than most files: it is the whole dispatcher side of one store, its ledger included.
 * Spend caps (spend-cap.ts) and the per-provider counts (provider-shares.ts) live apart.
 */
import type { Database } from 'bun:sqlite'
import { Money, minMoney, moneyText, ZERO } from '../../money/decimal.ts'
import { rowToClaimedLine, rowToRunnable, terminalStatus } from '../rows.ts'
import { ShareTally } from './sqlite-provider-shares.ts'
import { RETURNED_SHARD } from './progress-shards.ts'
import { addProgress, current, currentCount, foldProgress } from './sqlite-batch-progress.ts'
import { capRoomBack, claimCapped, endOverCap, noteClaimed } from './sqlite-spend-cap.ts'
import { enqueueWebhookEvents } from '../webhooks/sqlite-webhooks.ts'
import {
  OPEN_BATCH_STATUSES,
  WAITING_CODES,
  type BatchStatus,
  type BatchWaiting,
  type WaitingCode,
} from '../../domain.ts'
import type {
  CallsChange,
  ClaimedLine,
  DispatchStore,
  LineOutcome,
  LineUsage,
  RunnableBatch,
} from '../store.ts'

type Row = Record<string, any>

export class SqliteDispatch implements DispatchStore {
  constructor(private readonly db: Database) {}

  private q(sql: string) {
    return this.db.query<Row, any[]>(sql)
  }

  private tx<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate()
  }

  async runnableBatches(nowMs: number, limit: number): Promise<RunnableBatch[]> {
    // Accounts whose balance no longer covers their holds are left out in SQL too, or enough of
    // their batches could fill the LIMIT and starve everyone else. Money is decimal TEXT here, so
    // SQL compares it as REAL with a margin far above REAL's rounding (it never leaves out an
    // account that is covered) and coversHolds decides exactly.
    const rows = this.q(
      `SELECT b.id, b.account_id, b.created_at, b.deadline_at, b.endpoint,
         ${PENDING} AS pending, a.balance_usd, a.held_usd
       FROM batches b JOIN accounts a ON a.id = b.account_id
       WHERE b.status = 'in_progress' AND ${PENDING} > 0 AND b.deadline_at > ?
         AND (b.waiting_code IS NULL OR b.waiting_code <> 'max_cost_reached')
         AND CAST(a.balance_usd AS REAL) >= CAST(a.held_usd AS REAL) * (1 - 1e-9) - 1e-9
       ORDER BY b.deadline_at, b.id LIMIT ?`,
    ).all(Math.floor(nowMs / 1000), limit)
    return rows.filter(coversHolds).map(rowToRunnable)
  }

  async claimLines(
    batchId: string,
    owner: string,
    limit: number,
    nowMs: number,
    leaseUntilMs: number,
  ): Promise<ClaimedLine[]> {
    return this.tx(() => {
      const batch = current(
        this.db,
        this.q(
          `SELECT b.id, b.account_id, b.deadline_at, b.started_at, b.max_cost_usd, b.cost_usd,
             b.reserved_usd, a.balance_usd, a.held_usd AS account_held_usd
           FROM batches b JOIN accounts a ON a.id = b.account_id
           WHERE b.id = ? AND b.status = 'in_progress'`,
        ).get(batchId),
      )
      if (
        !batch ||
        !coversHolds({ balance_usd: batch.balance_usd, held_usd: batch.account_held_usd })
      )
        return []
      if (batch.max_cost_usd !== null)
        return claimCapped(this.db, batch, { batchId, owner, limit, nowMs, leaseUntilMs })
      const rows = this.q(
        `UPDATE lines SET status = 'running', lease_owner = ?, lease_until = ?, attempts = attempts + 1
         WHERE batch_id = ? AND line_no IN (
           SELECT line_no FROM lines WHERE batch_id = ? AND status = 'pending' AND not_before <= ?
           ORDER BY line_no LIMIT ?)
         RETURNING line_no, custom_id, input, attempts`,
      ).all(owner, leaseUntilMs, batchId, batchId, nowMs, limit)
      if (rows.length === 0) return []
      noteClaimed(this.db, batch, owner, { n: rows.length, nowMs })
      rows.sort((a, b) => a.line_no - b.line_no)
      return rows.map((row) => rowToClaimedLine(batchId, row, batch))
    })
  }

  async batchStatuses(ids: readonly string[]) {
    const statuses: Record<string, BatchStatus> = {}
    if (ids.length === 0) return statuses
    const rows = this.q(
      `SELECT id, status FROM batches WHERE id IN (${ids.map(() => '?').join(', ')})`,
    ).all(...ids)
    for (const row of rows) statuses[row.id] = row.status
    return statuses
  }

  async renewLeases(owner: string, leaseUntilMs: number) {
    return this.q(
      `UPDATE lines SET lease_until = ? WHERE lease_owner = ? AND status = 'running'`,
    ).run(leaseUntilMs, owner).changes
  }

  async recordOutcomes(
    owner: string,
    outcomes: readonly LineOutcome[],
    nowMs: number,
    calls: readonly CallsChange[] = [],
  ) {
    if (outcomes.length === 0 && calls.length === 0) return 0
    const now = Math.floor(nowMs / 1000)
    // One statement per line, its lease check in the WHERE clause; money and counters are summed
    // in memory and written once per batch and account at the end of the transaction.
    // No RETURNING: it makes SQLite keep a statement journal, which past 64 KiB (four of our
    // 16 KiB pages) goes to a temp file, for every line; that doubled this call's time (7 µs a
    // line more on the dispatch thread). A capped batch's ceilings are read apart
    // (Ledger.unreserve).
    const retry = this.q(
      `UPDATE lines SET status = 'pending', lease_owner = NULL, lease_until = NULL, not_before = ?,
         attempts = attempts - ?
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
      const ledger = new Ledger(this.db, owner)
      const shares = new ShareTally(this.db, owner)
      for (const change of calls)
        shares.add(change.batchId, change.provider, 'running', change.delta)
      let recorded = 0
      for (const outcome of outcomes) {
        const key = [outcome.batchId, outcome.lineNo, owner] as const
        if (outcome.kind === 'retry') {
          const changed = retry.run(outcome.notBefore, outcome.unsent ? 1 : 0, ...key).changes
          if (changed === 0) continue // lease lost
          ledger.unreserve(outcome.batchId, outcome.lineNo)
          ledger.count(outcome.batchId, 'retry')
          recorded++
          continue
        }
        // The charge is worked out first (it is what the line records), and only kept if the
        // line was still ours.
        const charge = ledger.charge(
          outcome.batchId,
          outcome.costUsd,
          outcome.kind === 'succeeded' ? outcome.ceilingUsd : undefined,
        )
        const changed =
          outcome.kind === 'succeeded'
            ? succeed.run(
                outcome.responseStatus,
                outcome.response,
                charge.text,
                outcome.provider,
                outcome.latencyMs,
                now,
                ...key,
              ).changes
            : fail.run(
                outcome.responseStatus,
                outcome.error.code,
                outcome.error.message,
                outcome.error.upstream === undefined
                  ? null
                  : JSON.stringify(outcome.error.upstream),
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
        ledger.unreserve(outcome.batchId, outcome.lineNo)
        ledger.count(outcome.batchId, outcome.kind)
        if (outcome.kind === 'succeeded' || outcome.kind === 'failed')
          ledger.addUsage(outcome.batchId, outcome.usage)
        if (outcome.provider !== null)
          shares.add(outcome.batchId, outcome.provider, outcome.kind, 1, charge.text)
        recorded++
      }
      ledger.write()
      shares.write()
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
      `SELECT batch_id, line_no, lease_owner FROM lines INDEXED BY lines_running WHERE status = 'running' AND ${where}`,
    ).all(...params)
    const reset = this.q(
      `UPDATE lines SET status = 'pending', lease_owner = NULL, lease_until = NULL
       WHERE batch_id = ? AND line_no = ? AND status = 'running' RETURNING ceiling_usd`,
    )
    const perBatch = new Map<string, { n: number; ceilings: Money | null }>()
    for (const row of rows) {
      const line = reset.get(row.batch_id, row.line_no)
      if (!line) continue
      const entry = perBatch.get(row.batch_id) ?? { n: 0, ceilings: null }
      entry.n++
      if (line.ceiling_usd !== null)
        entry.ceilings = (entry.ceilings ?? new Money(0)).plus(line.ceiling_usd)
      perBatch.set(row.batch_id, entry)
    }
    for (const [batchId, { n, ceilings }] of perBatch) {
      addProgress(this.db, batchId, RETURNED_SHARD, {
        pending: n,
        running: -n,
        reserved_usd: ceilings === null ? '0' : ceilings.negated(),
      })
      if (ceilings !== null && ceilings.isPositive()) capRoomBack(this.db, batchId)
    }
    // Their owner died or stopped: it has no call in flight for these batches any more.
    const idle = this.q('UPDATE batch_providers SET running = 0 WHERE batch_id = ? AND owner = ?')
    const pairs = new Set(rows.map((row) => `${row.batch_id}\u0000${row.lease_owner}`))
    for (const pair of pairs) idle.run(...(pair.split('\u0000') as [string, string]))
    return rows.length
  }

  async recordEtas(etas: readonly { batchId: string; eta: number | null }[]) {
    if (etas.length === 0) return
    // Whole seconds, as on PostgreSQL; a row whose eta is unchanged is not written again.
    const set = this.q(
      `UPDATE batches SET eta = ?1
       WHERE id = ?2 AND status IN ('in_progress', 'cancelling') AND eta IS NOT ?1`,
    )
    this.tx(() => {
      for (const { batchId, eta } of etas) set.run(eta === null ? null : Math.ceil(eta), batchId)
    })
  }

  async advanceBatches(now: number) {
    return this.tx(() => {
      const changed: string[] = []
      // Past the deadline: lines not yet run end `expired`; running ones may still finish.
      const overdue = this.q(
        `SELECT id FROM batches b WHERE status IN ('in_progress', 'cancelling') AND deadline_at <= ?
           AND ${PENDING} > 0`,
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
        `SELECT id FROM batches b WHERE status = 'cancelling' AND ${PENDING} > 0`,
      ).all()
      for (const { id } of cancelling) {
        const n = this.q(
          `UPDATE lines SET status = 'cancelled', error_code = 'batch_cancelled', finished_at = ?
           WHERE batch_id = ? AND status = 'pending'`,
        ).run(now, id).changes
        this.q(
          'UPDATE batches SET pending = pending - ?, cancelled = cancelled + ? WHERE id = ?',
        ).run(n, n, id)
      }
      // A capped batch with nothing in flight ends the lines that can no longer fit (docs/money-and-limits.md).
      endOverCap(this.db, now)
      // A batch is `finalizing` for one tick between its last line and its terminal status.
      for (const { id } of this.q(`SELECT id FROM batches WHERE status = 'finalizing'`).all()) {
        if (finishBatch(this.db, id, now)) changed.push(id)
      }
      const idle = this.q(
        `SELECT id, status FROM batches b WHERE status IN ('in_progress', 'cancelling')
           AND ${PENDING} = 0 AND ${RUNNING} = 0`,
      ).all()
      for (const { id, status } of idle) {
        if (status === 'cancelling') {
          if (finishBatch(this.db, id, now)) changed.push(id)
        } else {
          this.q(`UPDATE batches SET status = 'finalizing', finalizing_at = ? WHERE id = ?`).run(
            now,
            id,
          )
          changed.push(id)
        }
      }
      return changed
    })
  }

  async setWaiting(
    batchId: string,
    waiting: BatchWaiting | null,
    replaces: readonly WaitingCode[] = WAITING_CODES,
  ) {
    const code = waiting?.code ?? null
    const message = waiting?.message ?? null
    const until = waiting?.until ?? null
    const codes = replaces.map(() => '?').join(', ')
    return (
      this.q(
        `UPDATE batches SET waiting_code = ?, waiting_message = ?, waiting_until = ?
         WHERE id = ? AND status IN ${OPEN}
           AND (waiting_code IS NULL OR waiting_code IN (${codes || "''"}))
           AND (waiting_code IS NOT ? OR waiting_message IS NOT ? OR waiting_until IS NOT ?)`,
      ).run(code, message, until, batchId, ...replaces, code, message, until).changes > 0
    )
  }
}

const OPEN = `(${OPEN_BATCH_STATUSES.map((status) => `'${status}'`).join(', ')})`
const PENDING = currentCount('pending')
const RUNNING = currentCount('running')

/**
 * Whether an account's balance still covers what it holds. Only a line that cost more than its
 * ceiling (or credit taken away by an operator) can make it fall short; until a deposit makes it
 * cover them again, none of the account's lines is dispatched, so no further line runs on credit
 * that is not there (they wait, and expire unbilled at their deadline).
 */
function coversHolds(row: Row): boolean {
  return !new Money(row.balance_usd).lessThan(row.held_usd)
}

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

type Kind = 'succeeded' | 'failed' | 'retry'

/**
 * Money and counters of one recordOutcomes transaction, kept in memory and written once per
 * batch and account. A line is never charged more than its account's balance, and what it is
 * charged comes out of its batch's hold first (the hold is what admission reserved).
 */
class Ledger {
  private readonly batches = new Map<
    string,
    {
      accountId: string
      cost: Money
      held: Money
      /** cost and held as read (the row with its shards): what is written is the change. */
      costBefore: Money
      heldBefore: Money
      /** It has a spend cap: its lines, and only they, have ceilings (set at admission). */
      capped: boolean
      /** Ceilings of its lines in flight (a capped batch's); null while unchanged. */
      reserved: Money | null
      reservedBefore: string
      counts: Record<Kind, number>
      usage: Omit<LineUsage, 'uncachedCostUsd'> & { uncached: Money }
    }
  >()
  private readonly accounts = new Map<string, { balance: Money; held: Money }>()

  constructor(
    private readonly db: Database,
    /** The dispatcher whose outcomes these are: its progress shard (batch-progress.ts). */
    private readonly owner: string,
  ) {}

  private batch(id: string) {
    let entry = this.batches.get(id)
    if (!entry) {
      const row = current(
        this.db,
        this.db
          .query<Row, [string]>(
            `SELECT id, account_id, cost_usd, held_usd, reserved_usd, max_cost_usd
             FROM batches WHERE id = ?`,
          )
          .get(id),
      )!
      entry = {
        accountId: row.account_id,
        cost: new Money(row.cost_usd),
        held: new Money(row.held_usd),
        costBefore: new Money(row.cost_usd),
        heldBefore: new Money(row.held_usd),
        capped: row.max_cost_usd !== null,
        reserved: null,
        reservedBefore: row.reserved_usd,
        counts: { succeeded: 0, failed: 0, retry: 0 },
        usage: {
          input: 0,
          cached: 0,
          written: 0,
          output: 0,
          uncached: new Money(0),
        },
      }
      this.batches.set(id, entry)
    }
    return entry
  }

  private account(id: string) {
    let entry = this.accounts.get(id)
    if (!entry) {
      const row = this.db
        .query<Row, [string]>('SELECT balance_usd, held_usd FROM accounts WHERE id = ?')
        .get(id)!
      entry = { balance: new Money(row.balance_usd), held: new Money(row.held_usd) }
      this.accounts.set(id, entry)
    }
    return entry
  }

  count(batchId: string, kind: Kind) {
    this.batch(batchId).counts[kind]++
  }

  /** A recorded line's tokens by class, added to its batch's usage (docs/pricing.md). */
  addUsage(batchId: string, usage: LineUsage | undefined) {
    if (!usage) return
    const sum = this.batch(batchId).usage
    sum.input += usage.input
    sum.cached += usage.cached
    sum.written += usage.written
    sum.output += usage.output
    sum.uncached = sum.uncached.plus(usage.uncachedCostUsd)
  }

  /** A recorded line's ceiling (a capped batch's) is no longer reserved. */
  unreserve(batchId: string, lineNo: number) {
    const batch = this.batch(batchId)
    if (!batch.capped) return
    const line = this.db
      .query<Row, [string, number]>(
        'SELECT ceiling_usd FROM lines WHERE batch_id = ? AND line_no = ?',
      )
      .get(batchId, lineNo)
    if (!line || line.ceiling_usd === null) return
    batch.reserved = (batch.reserved ?? new Money(batch.reservedBefore)).minus(line.ceiling_usd)
  }

  /**
   * `ceilingUsd`: set when the line cost more than its ceiling. Then no more than the ceiling
   * comes out of the batch's hold, which must still cover the batch's other lines; the excess is
   * taken from the account's free credit (and, if that is short, from credit held for other
   * work: the claim then stops dispatching the account's lines, see claimLines).
   */
  charge(
    batchId: string,
    costUsd: string,
    ceilingUsd?: string,
  ): { text: string; undo: () => void } {
    const cost = new Money(costUsd)
    if (cost.isZero()) return { text: '0', undo: () => {} }
    const batch = this.batch(batchId)
    const account = this.account(batch.accountId)
    const charged = minMoney(cost, account.balance)
    const holdable = ceilingUsd === undefined ? charged : minMoney(charged, new Money(ceilingUsd))
    const released = minMoney(holdable, batch.held)
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
    for (const [id, b] of this.batches) {
      const { succeeded, failed, retry } = b.counts
      const reserved =
        b.reserved === null ? new Money(0) : Money.max(b.reserved, ZERO).minus(b.reservedBefore)
      addProgress(this.db, id, this.owner, {
        pending: retry,
        running: -(succeeded + failed + retry),
        succeeded,
        failed,
        cost_usd: b.cost.minus(b.costBefore),
        held_usd: b.held.minus(b.heldBefore),
        reserved_usd: reserved,
        usage_input_tokens: b.usage.input,
        usage_cached_input_tokens: b.usage.cached,
        usage_cache_write_tokens: b.usage.written,
        usage_output_tokens: b.usage.output,
        usage_uncached_cost_usd: b.usage.uncached,
      })
      if (reserved.isNegative()) capRoomBack(this.db, id)
    }
    const accountUpdate = this.db.query(
      'UPDATE accounts SET balance_usd = ?, held_usd = ? WHERE id = ?',
    )
    for (const [id, a] of this.accounts)
      accountUpdate.run(moneyText(a.balance), moneyText(a.held), id)
  }
}
