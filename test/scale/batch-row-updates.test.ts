/**
 * A batch's progress off its row (docs/scale.md): two gateway processes dispatch one batch over
 * HTTP against the simulator, and its `batches` row is updated a handful of times (started,
 * finalizing, completed, the planner's eta), not once per claim and settlement. The bound is the
 * 20,000-line target (fewer than 200 updates) scaled to this batch's size; bench/scale.ts
 * measures the 20,000-line batch itself. The counts come from pg_stat_user_tables, which a
 * backend reports when it exits: the instances are stopped before they are read.
 */
import { expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { chatLine, jsonl } from '../helpers/gateway.ts'
import { describeScale, withSimFleet, type Batch } from './fleet.ts'

const LINES = 4_000
const BOUND = Math.ceil((200 * LINES) / 20_000)

describeScale('scale: batch progress off its row', () => {
  test(`two instances run a ${LINES}-line batch with fewer than ${BOUND} updates of its row`, async () => {
    await withSimFleet(
      { latencyMs: 20 },
      { instances: 2, maxConcurrency: 64, env: { MULTIGRID_POLL_MS: '100' } },
      async (fleet) => {
        const { accountId, key } = await fleet.newAccount('100')
        const lines = Array.from({ length: LINES }, (_, i) => chatLine(`l-${i}`, `row line ${i}`))
        const created = await fleet.submit(0, key, jsonl(lines))
        expect(created.status).toBe(201)
        const { id } = (await created.json()) as Batch
        const batch = await fleet.waitDone(key, id, 100_000)
        expect(batch.status).toBe('completed')
        expect(batch.request_counts).toMatchObject({
          total: LINES,
          succeeded: LINES,
          pending: 0,
          running: 0,
        })
        // What the batch object says is what its lines say, and what the account was charged.
        const [sum] = await fleet.sql`
          SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
            sum(cost_usd) AS cost FROM lines WHERE batch_id = ${id}`
        expect(sum.succeeded).toBe(LINES)
        expect(new Decimal(batch.cost_usd).equals(sum.cost)).toBe(true)
        const [account] = await fleet.sql`SELECT balance_usd FROM accounts WHERE id = ${accountId}`
        expect(new Decimal('100').minus(account.balance_usd).equals(sum.cost)).toBe(true)
        // Ended: its progress shards were folded into the row.
        const [shards] =
          await fleet.sql`SELECT count(*)::int AS n FROM batch_progress WHERE batch_id = ${id}`
        expect(shards.n).toBe(0)
        // And the account's ledger shards into its row (sql/0018_account_ledger.sql): its row
        // alone is its balance, nothing held.
        const [ledger] =
          await fleet.sql`SELECT count(*)::int AS n FROM account_ledger WHERE account_id = ${accountId}`
        expect(ledger.n).toBe(0)
        const [held] = await fleet.sql`SELECT held_usd FROM accounts WHERE id = ${accountId}`
        expect(new Decimal(held.held_usd).isZero()).toBe(true)
        await Promise.all(fleet.processes.map((p) => p.kill('SIGTERM')))
        // Their backends report their counts as they exit, a moment after the processes: read
        // until two reads a second apart agree (bounded), so a late report is not missed.
        const updates = async () =>
          (
            await fleet.sql`
              SELECT n_tup_upd::int AS updates FROM pg_stat_user_tables
              WHERE schemaname = ${fleet.schema} AND relname = 'batches'`
          )[0].updates as number
        let seen = -1
        for (let i = 0; i < 10; i++) {
          await Bun.sleep(1_000)
          const now = await updates()
          if (now === seen) break
          seen = now
        }
        console.error(`${LINES} lines: ${seen} updates of the batches row`)
        expect(seen).toBeGreaterThan(0)
        expect(seen).toBeLessThan(BOUND)
      },
    )
  }, 150_000)
})
