/**
 * A schema bomb in a fleet (docs/structured-outputs.md, issue 23): two instances on one PostgreSQL schema with
 * 1-second leases, and a budget longer than a lease, so that each bomb line is judged for longer
 * than its lease lasts. The lease is renewed while the answer is judged off the event loop: each
 * line goes upstream exactly once and ends structured_output_unchecked, billed.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import {
  chatLine,
  freshSchemaUrl,
  jsonl,
  startTestGateway,
  TEST_DATABASE_URL,
  type TestGateway,
} from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'
import { bombSchema, schemaFormat, watchHealth } from './hostile.ts'

describe.skipIf(!TEST_DATABASE_URL)('a schema bomb across two instances (postgres)', () => {
  let sim: Simulator
  let first: TestGateway
  let second: TestGateway

  beforeAll(async () => {
    sim = await startSimulator({})
    const catalog = testCatalog({ openai: `${sim.url}/v1` })
    const env = {
      DATABASE_URL: freshSchemaUrl(TEST_DATABASE_URL!).url,
      MULTIGRID_POLL_MS: '20',
      MULTIGRID_LEASE_SECONDS: '1',
      MULTIGRID_SCHEMA_CHECK_MS: '1500',
    }
    first = await startTestGateway({ catalog, env })
    second = await startTestGateway({ catalog, env, sharesSchema: true })
  })
  afterAll(async () => {
    await second?.stop()
    await first?.stop()
    await sim?.stop()
  })

  test('each bomb line is sent upstream once, judged past its lease, and ends unchecked and billed', async () => {
    const { key } = await first.newAccount('10')
    const lines = Array.from({ length: 4 }, (_, i) =>
      chatLine(`bomb-${i}`, `[sim:answer]"x${i}"`, {
        response_format: schemaFormat(bombSchema(23)),
        max_tokens: 16,
      }),
    )
    const health = watchHealth(second.url)
    const created = await first.request('/v1/batches', key, {
      method: 'POST',
      headers: { 'content-type': 'application/jsonl' },
      body: jsonl(lines),
    })
    expect(created.status).toBe(201)
    const { id } = (await created.json()) as { id: string }
    await waitFor(
      `batch ${id}`,
      async () => {
        const body = (await (await second.request(`/v1/batches/${id}`, key)).json()) as {
          status: string
        }
        return FINAL_BATCH.includes(body.status) ? body : null
      },
      60_000,
    )
    const worstHealthMs = await health.stop()
    const results = (await (await first.request(`/v1/batches/${id}/results`, key)).text())
      .trim()
      .split('\n')
      .map(
        (l) =>
          JSON.parse(l) as {
            status: string
            attempts: number
            cost_usd: string
            error: { code: string }
          },
      )
    for (const line of results) {
      expect(line).toMatchObject({ status: 'failed', attempts: 1 })
      expect(line.error.code).toBe('structured_output_unchecked')
      expect(Number(line.cost_usd)).toBeGreaterThan(0)
    }
    const stats = sim.stats()
    expect(stats.byPath['/v1/chat/completions']).toBe(4)
    expect(stats.maxPromptCount).toBe(1)
    expect(worstHealthMs).toBeLessThan(1000)
  })
})
