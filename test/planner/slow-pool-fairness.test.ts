/**
 * A batch waiting for a slow pool holds no more of the instance's room than the pool can take
 * (its slots and one round waiting, docs/routing.md): another batch of the same account, due
 * later, on a provider that is idle, runs at once instead of behind the pool's queue.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'

let pool: Simulator
let paid: Simulator
let gw: TestGateway

const model = (id: string, provider: string) => ({
  id,
  endpoints: ['chat'],
  context_tokens: 32000,
  max_output_tokens: 1024,
  offerings: [
    {
      provider,
      upstream_model: 'sim-chat',
      input_usd_per_mtok: '1',
      output_usd_per_mtok: '2',
    },
  ],
})

beforeAll(async () => {
  pool = await startSimulator({ latencyMs: 1_000 })
  paid = await startSimulator({ latencyMs: 5 })
  gw = await startTestGateway({
    catalog: {
      providers: {
        'gpu-pool': { kind: 'openai', base_url: `${pool.url}/v1`, max_concurrency: 2 },
        paid: { kind: 'openai', base_url: `${paid.url}/v1`, max_concurrency: 64 },
      },
      models: [model('pool/chat', 'gpu-pool'), model('paid/chat', 'paid')],
    },
    env: { MULTIGRID_POLL_MS: '20' },
  })
})
afterAll(async () => {
  await gw.stop()
  await pool.stop()
  await paid.stop()
})

test("a slow pool's batch leaves the room it cannot use to a batch on an idle provider", async () => {
  const { key } = await gw.newAccount('10')
  const submit = async (hours: number, lines: unknown[]) => {
    const answer = await gw.request(`/v1/batches?completion_window_hours=${hours}`, key, {
      method: 'POST',
      headers: { 'content-type': 'application/jsonl' },
      body: jsonl(lines),
    })
    expect(answer.status).toBe(201)
    return ((await answer.json()) as { id: string }).id
  }
  const batch = async (id: string) =>
    (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
      status: string
      request_counts: { running: number }
    }
  // Due first, so its account's claims go to it first: 200 lines at 2 × 1 s a round.
  const slow = await submit(
    1,
    Array.from({ length: 200 }, (_, i) => chatLine(`slow-${i}`, `q ${i}`, {}, 'pool/chat')),
  )
  await waitFor('the pool to be busy', async () => pool.stats().requests >= 2)
  const started = performance.now()
  const quick = await submit(
    2,
    Array.from({ length: 3 }, (_, i) => chatLine(`quick-${i}`, `q ${i}`, {}, 'paid/chat')),
  )
  await waitFor(
    'the batch on the idle provider',
    async () => (await batch(quick)).status === 'completed',
  )
  // Behind the pool's queue it would wait for the lines claimed ahead of it: ~50 rounds of 1 s.
  expect(performance.now() - started).toBeLessThan(5_000)
  const waiting = await batch(slow)
  expect(waiting.status).toBe('in_progress')
  // Claimed here: a first claim's worth, not the whole room of every provider's slots.
  expect(waiting.request_counts.running).toBeLessThanOrEqual(20)
  expect((await gw.request(`/v1/batches/${slow}`, key, { method: 'DELETE' })).status).toBe(200)
})
