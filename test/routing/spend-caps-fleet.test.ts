/**
 * A spend cap holds across dispatcher instances and across a crash: two gateways on one
 * PostgreSQL claiming lines of the same capped batch, and a gateway process killed with SIGKILL
 * while a capped batch runs (restarted on the same store). The simulator reports 20× the usage
 * each line's ceiling allows, so every line is billed exactly its ceiling c: a cap of k.5 × c lets
 * exactly k lines run, and one line too many would show as cost_usd above the cap.
 */
import { describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator } from '../../src/simulator/server.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import {
  ADMIN_TOKEN,
  chatLine,
  dropTestSchema,
  freshSchemaUrl,
  jsonl,
  startTestGateway,
  STORES,
  TEST_DATABASE_URL,
} from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess, type GatewayProcess } from '../helpers/process-gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

/** Lines of one size, so one ceiling c each. */
const LINES = Array.from({ length: 40 }, (_, i) =>
  chatLine(`fleet-${String(i).padStart(2, '0')}`, `capped fleet line ${i % 10}`, {
    max_tokens: 64,
  }),
)
const FILE = jsonl(LINES)

interface Batch {
  id: string
  status: string
  cost_usd: string
  cost_ceiling_usd: string
  request_counts: Record<string, number>
}

/** One line's ceiling: the file's divided by its lines (all alike). */
const lineCeiling = (batch: Batch) => new Decimal(batch.cost_ceiling_usd).div(LINES.length)

/** A cap with room for `k` lines and half of another. */
const capFor = (c: Decimal, k: number) => c.times(k + 0.5).toDecimalPlaces(6, Decimal.ROUND_DOWN)

function expectHeld(batch: Batch, cap: Decimal, c: Decimal, k: number) {
  expect(batch.status).toBe('completed')
  expect(new Decimal(batch.cost_usd).lessThanOrEqualTo(cap)).toBe(true)
  expect(batch.request_counts).toMatchObject({ succeeded: k, cancelled: LINES.length - k })
  expect(new Decimal(batch.cost_usd).equals(c.times(k).toDecimalPlaces(6, Decimal.ROUND_UP))).toBe(
    true,
  )
}

describe.skipIf(!TEST_DATABASE_URL)('a spend cap across two instances (postgres)', () => {
  test('two gateways claiming one capped batch never pass its cap', async () => {
    const sim = await startSimulator({ latencyMs: 30, usageFactor: 20 })
    const { url } = freshSchemaUrl(TEST_DATABASE_URL!)
    const env = { DATABASE_URL: url, MULTIGRID_POLL_MS: '20' }
    const catalog = testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 64 })
    const first = await startTestGateway({ catalog, env, sharesSchema: true })
    const second = await startTestGateway({ catalog, env, sharesSchema: true })
    try {
      const { key } = await first.newAccount('100')
      const submit = (query: string) =>
        first.request(`/v1/batches${query}`, key, {
          method: 'POST',
          body: FILE,
          headers: { 'content-type': 'application/jsonl' },
        })
      const quote = (await (await submit('?dry_run=true')).json()) as Batch
      const c = lineCeiling(quote)
      const k = 6
      const cap = capFor(c, k)
      const created = (await (await submit(`?max_cost_usd=${cap}`)).json()) as Batch
      const batch = await waitFor('the batch to finish', async () => {
        // Read through the other instance: both serve the same batch.
        const view = (await (
          await second.request(`/v1/batches/${created.id}`, key)
        ).json()) as Batch
        return FINAL_BATCH.includes(view.status) ? view : null
      })
      expectHeld(batch, cap, c, k)
      // No line beyond the cap was even sent.
      expect(sim.stats().byPath['/v1/chat/completions']).toBe(k)
    } finally {
      await first.stop()
      await second.stop()
      await sim.stop()
      await dropTestSchema(url)
    }
  }, 60_000)
})

for (const storeKind of STORES) {
  describe(`a spend cap across a SIGKILL (${storeKind})`, () => {
    test('a capped batch killed mid-run ends within its cap after a restart', async () => {
      const sim = await startSimulator({ latencyMs: 400, usageFactor: 20 })
      const env: Record<string, string> = {
        PORT: String(freePort()),
        HOST: '127.0.0.1',
        MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-capkill-')),
        MULTIGRID_CONFIG: writeCatalog(
          testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 4 }),
        ),
        MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
        MULTIGRID_LEASE_SECONDS: '1',
        MULTIGRID_POLL_MS: '50',
        LOG_LEVEL: 'error',
      }
      if (storeKind === 'postgres') env.DATABASE_URL = freshSchemaUrl(TEST_DATABASE_URL!).url
      let gateway: GatewayProcess = await spawnGatewayProcess(env)
      try {
        const admin = async (path: string, body?: unknown) =>
          (await (
            await fetch(`${gateway.url}/admin/v1${path}`, {
              method: body ? 'POST' : 'GET',
              headers: {
                authorization: `Bearer ${ADMIN_TOKEN}`,
                'content-type': 'application/json',
              },
              body: body ? JSON.stringify(body) : undefined,
            })
          ).json()) as Record<string, string>
        const account = await admin('/accounts', { name: 'capkill', credit_usd: '10' })
        const { key } = await admin(`/accounts/${account.id}/keys`, {})
        const headers = { authorization: `Bearer ${key}` }
        const submit = async (query: string) =>
          (await (
            await fetch(`${gateway.url}/v1/batches${query}`, {
              method: 'POST',
              headers,
              body: FILE,
            })
          ).json()) as Batch
        const c = lineCeiling(await submit('?dry_run=true'))
        const k = 10
        const cap = capFor(c, k)
        const { id } = await submit(`?max_cost_usd=${cap}`)
        const read = async () =>
          (await (await fetch(`${gateway.url}/v1/batches/${id}`, { headers })).json()) as Batch
        // Killed with some lines recorded and others upstream (4 at a time, 400 ms each).
        await waitFor('some lines to be recorded', async () => {
          const batch = await read()
          return batch.request_counts.succeeded >= 2 && batch.request_counts.running > 0
        })
        expect(await gateway.kill('SIGKILL')).not.toBe(0)
        gateway = await spawnGatewayProcess(env)
        sim.configure({ latencyMs: 20 })
        const batch = await waitFor(
          'the batch to finish after the restart',
          async () => {
            const view = await read()
            return FINAL_BATCH.includes(view.status) ? view : null
          },
          60_000,
        )
        expectHeld(batch, cap, c, k)
        const after = await admin(`/accounts/${account.id}`)
        expect(new Decimal(10).minus(after.balance_usd!).equals(batch.cost_usd)).toBe(true)
        expect(new Decimal(after.held_usd!).isZero()).toBe(true)
      } finally {
        await gateway.kill('SIGKILL')
        await sim.stop()
        if (env.DATABASE_URL) await dropTestSchema(env.DATABASE_URL)
      }
    }, 90_000)
  })
}
