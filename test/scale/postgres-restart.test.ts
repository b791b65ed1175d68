/**
 * PostgreSQL restarts while two instances run a batch: they reconnect, the outcomes they held
 * are written when it is back, and the batch finishes with every line recorded and billed once.
 * This restarts the local cluster (pg_ctlcluster), so other suites running at the same moment
 * see their connections dropped; the server is brought back up whatever happens here.
 */
import { describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { startSimulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'
import { NEEDS, SCALE_READY, startFleet, type Batch } from './fleet.ts'

const cluster = () => [
  'pg_ctlcluster',
  '--skip-systemctl-redirect',
  readdirSync('/etc/postgresql')[0],
  'main',
]
/** src/store/postgres/patch-postgres-driver.mjs (postinstall): without it the driver crashes the process here. */
const driverPatched = () =>
  readFileSync(
    join(import.meta.dir, '../../node_modules/postgres/src/connection.js'),
    'utf8',
  ).includes('multigrid: nextWrite guard')
const pgReady = () => Bun.spawnSync(['pg_isready', '-h', '127.0.0.1', '-q']).exitCode === 0

/** Waits for the server, starting it if a restart left it down. Bounded: 30 s. */
async function ensurePostgresUp() {
  for (let i = 0; i < 60 && !pgReady(); i++) {
    if (i === 10) Bun.spawnSync([...cluster(), 'start'], { timeout: 20_000 })
    await Bun.sleep(500)
  }
}

// Only when the cluster is local and ours to restart.
const CAN_RESTART =
  SCALE_READY &&
  (() => {
    try {
      return readdirSync('/etc/postgresql').length > 0
    } catch {
      return false
    }
  })()

if (!CAN_RESTART) {
  describe('scale: PostgreSQL restart', () => {
    test.skip(`${NEEDS}, on a local cluster pg_ctlcluster can restart`, () => {})
  })
} else {
  describe('scale: PostgreSQL restart', () => {
    test('mid-batch: the instances reconnect and the batch finishes, nothing lost, nothing twice', async () => {
      expect(driverPatched()).toBe(true) // else run `node src/store/postgres/patch-postgres-driver.mjs` (npm's postinstall)
      const sim = await startSimulator({ latencyMs: 50 })
      const fleet = await startFleet({
        instances: 2,
        openai: `${sim.url}/v1`,
        maxConcurrency: 32,
        env: { MULTIGRID_POLL_MS: '100', MULTIGRID_LEASE_SECONDS: '15' },
      })
      try {
        const { accountId, key } = await fleet.newAccount('100')
        const lines = Array.from({ length: 3000 }, (_, i) =>
          chatLine(`r-${i}`, `restart line ${i}`),
        )
        const { id } = (await (await fleet.submit(0, key, jsonl(lines))).json()) as Batch
        await waitFor(
          'progress',
          async () => (await fleet.batch(0, key, id)).request_counts.succeeded >= 600,
          30_000,
        )
        const restart = Bun.spawnSync([...cluster(), 'restart'], { timeout: 45_000 })
        expect(restart.exitCode).toBe(0)
        await ensurePostgresUp()
        const batch = await fleet.waitDone(key, id, 60_000)
        expect(batch.status).toBe('completed')
        expect(batch.request_counts).toMatchObject({
          total: 3000,
          succeeded: 3000,
          failed: 0,
          pending: 0,
          running: 0,
        })
        // Every line went upstream once: the outcomes waited in the recorders, leases held.
        const stats = sim.stats()
        expect(stats.byPath['/v1/chat/completions']).toBe(3000)
        expect(stats.maxPromptCount).toBe(1)
        const [row] =
          await fleet.sql`SELECT count(*)::int AS n, sum(cost_usd) AS cost FROM lines WHERE batch_id = ${id} AND status = 'succeeded'`
        expect(row.n).toBe(3000)
        const [account] =
          await fleet.sql`SELECT balance_usd, held_usd FROM accounts WHERE id = ${accountId}`
        expect(new Decimal(account.held_usd).isZero()).toBe(true)
        expect(new Decimal(100).minus(account.balance_usd).equals(row.cost)).toBe(true)
        // Both instances are ready again, and a new batch runs (claim loop and nudges alive).
        for (const url of fleet.urls) expect((await fetch(`${url}/readyz`)).status).toBe(200)
        const second = (await (
          await fleet.submit(1, key, jsonl([chatLine('after-1', 'after the restart')]))
        ).json()) as Batch
        expect((await fleet.waitDone(key, second.id, 15_000)).request_counts.succeeded).toBe(1)
      } catch (error) {
        fleet.failed()
        throw error
      } finally {
        await ensurePostgresUp()
        await fleet.stop()
        await sim.stop()
      }
    }, 90_000)
  })
}
