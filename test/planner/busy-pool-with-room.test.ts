/**
 * Why a batch waits (docs/routing.md) when its pool is full with an earlier batch's lines while the
 * instance itself has room for more (another provider, of another model, is idle): the later
 * batch's lines stay pending, and its `waiting` says `capacity_busy` rather than null.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'
import { nativeClient } from '../helpers/native-client.ts'

const POOL_MODEL = 'sim/pooled'

function catalog(url: string) {
  const model = (id: string, provider: string) => ({
    id,
    endpoints: ['chat'],
    context_tokens: 32000,
    max_output_tokens: 4096,
    offerings: [
      {
        provider,
        upstream_model: 'sim-chat',
        input_usd_per_mtok: '0',
        output_usd_per_mtok: '0',
      },
    ],
  })
  return {
    providers: {
      pool: { kind: 'openai', base_url: `${url}/v1`, max_concurrency: 2, timeout_s: 5 },
      // Idle, and large: the instance's room is never all taken by the pool's lines.
      paid: { kind: 'openai', base_url: `${url}/v1`, max_concurrency: 64, timeout_s: 5 },
    },
    models: [model(POOL_MODEL, 'pool'), model('sim/other', 'paid')],
  }
}

interface Batch {
  id: string
  status: string
  request_counts: Record<string, number>
  waiting: { code: string; message: string } | null
}

const lines = (prefix: string, count: number) =>
  Array.from({ length: count }, (_, i) => chatLine(`${prefix}${i}`, `q ${i}`, {}, POOL_MODEL))

for (const storeKind of STORES) {
  describe(`a full pool, the instance with room (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 50 })
      gw = await startTestGateway({
        store: storeKind,
        catalog: catalog(sim.url),
        env: { MULTIGRID_POLL_MS: '20' },
      })
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    test('a later batch whose lines wait behind an earlier one says capacity_busy, then runs', async () => {
      const { key } = await gw.newAccount('100', { rate_limit_per_minute: 100_000 })
      const { submit, read, finished } = nativeClient<Batch, { status: string }>(
        () => gw,
        () => key,
      )
      const first = await submit(jsonl(lines('u', 400)), '?completion_window_hours=1')
      await waitFor('the first batch to run', async () => {
        const batch = await read(first.id)
        return batch.request_counts.succeeded > 0
      })
      const second = await submit(jsonl(lines('l', 6)), '?completion_window_hours=72')
      // Its lines stand still behind the first batch's (due earlier) for seconds on end: the
      // batch says so, as the planner sees it.
      let busy = await read(second.id)
      const until = Date.now() + 6_000
      while (busy.waiting === null && Date.now() < until) {
        await Bun.sleep(100)
        busy = await read(second.id)
      }
      // Most of its lines stand pending; one may hold a place in the pool's queue, counted running
      // while it waits at the gate, which is capacity_busy as well (docs/routing.md).
      expect(busy.request_counts.pending).toBeGreaterThanOrEqual(5)
      expect(busy.waiting?.code).toBe('capacity_busy')
      expect(busy.waiting!.message).toContain('pool')
      expect((await read(first.id)).status).toBe('in_progress')
      await gw.request(`/v1/batches/${first.id}`, key, { method: 'DELETE' })
      const done = await finished(second.id, 20_000)
      expect(done.status).toBe('completed')
      expect(done.waiting).toBeNull()
    }, 40_000)
  })
}
