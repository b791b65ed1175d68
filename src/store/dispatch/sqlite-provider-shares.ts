/** The embedded store's batch_providers writes (routing.providers, docs/routing.md). */
import type { SqliteConnection as Database } from '../connection.ts'
import { Money, moneyText } from '../../money/decimal.ts'

type Row = Record<string, any>

/**
 * What one recordOutcomes transaction adds to batch_providers: per batch and provider, this
 * owner's settled lines, their cost and the change in its calls in flight; one write per pair.
 */
export class ShareTally {
  private readonly entries = new Map<
    string,
    {
      batchId: string
      provider: string
      succeeded: number
      failed: number
      running: number
      cost: Money
    }
  >()

  constructor(
    private readonly db: Database,
    private readonly owner: string,
  ) {}

  add(
    { batchId, provider }: { batchId: string; provider: string },
    field: 'succeeded' | 'failed' | 'running',
    n: number,
    costUsd = '0',
  ) {
    const key = `${batchId}\u0000${provider}`
    let entry = this.entries.get(key)
    if (!entry) {
      entry = { batchId, provider, succeeded: 0, failed: 0, running: 0, cost: new Money(0) }
      this.entries.set(key, entry)
    }
    entry[field] += n
    if (costUsd !== '0') entry.cost = entry.cost.plus(costUsd)
  }

  write() {
    if (this.entries.size === 0) return
    const read = this.db.query<Row, [string, string, string]>(
      'SELECT cost_usd FROM batch_providers WHERE batch_id = ? AND provider = ? AND owner = ?',
    )
    const upsert = this.db.query(
      `INSERT INTO batch_providers (batch_id, provider, owner, succeeded, failed, running, cost_usd)
       VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (batch_id, provider, owner) DO UPDATE SET
         succeeded = succeeded + excluded.succeeded, failed = failed + excluded.failed,
         running = running + excluded.running, cost_usd = excluded.cost_usd`,
    )
    for (const e of this.entries.values()) {
      const before = read.get(e.batchId, e.provider, this.owner)?.cost_usd ?? '0'
      const cost = moneyText(e.cost.plus(before))
      upsert.run(e.batchId, e.provider, this.owner, e.succeeded, e.failed, e.running, cost)
    }
  }
}
