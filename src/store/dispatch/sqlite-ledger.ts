/** The money and counters of one recordOutcomes transaction on the embedded store. */
import { Money, minMoney, moneyText, ZERO } from '../../money/decimal.ts'
import type { SqliteConnection as Database } from '../connection.ts'
import type { LineUsage } from './dispatch-store.ts'
import { addProgress, current } from './sqlite-batch-progress.ts'
import { capRoomBack } from './sqlite-spend-cap.ts'

type Row = Record<string, any>

type Kind = 'succeeded' | 'failed' | 'retry'

/**
 * Money and counters of one recordOutcomes transaction, kept in memory and written once per
 * batch and account. A line is never charged more than its account's balance, and what it is
 * charged comes out of its batch's hold first (the hold is what admission reserved).
 */
export class Ledger {
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
    /** The dispatcher whose outcomes these are: its progress shard (sqlite-batch-progress.ts). */
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
