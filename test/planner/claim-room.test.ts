/**
 * A batch is claimed no further ahead than its offerings can take (docs/routing.md: their slots
 * and one round waiting). A batch waiting for a slow pool leaves the rest of the instance's room
 * to another batch of the same account, due later, on a provider that is idle: it runs at once
 * instead of behind the pool's queue. And a batch that mixes models is claimed by the room of
 * each: one model's provider paused on a 429 does not stop the other model's lines, though the
 * paused model's lines, handed back unsent, come first in the batch again and again.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import type { SimulatorOptions } from '../../src/simulator/options.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'

/**
 * A gateway with one chat model `<name>/chat` per provider, each provider a simulator of its own
 * (started and stopped with the describe block): the gateway, and each simulator by name.
 */
function gatewayOver(providers: Record<string, { sim: SimulatorOptions; slots: number }>) {
  const sims = new Map<string, Simulator>()
  let gw: TestGateway | null = null
  beforeAll(async () => {
    const entries = Object.entries(providers)
    for (const [name, { sim }] of entries) sims.set(name, await startSimulator(sim))
    gw = await startTestGateway({
      catalog: {
        providers: Object.fromEntries(
          entries.map(([name, { slots }]) => [
            name,
            { kind: 'openai', base_url: `${sims.get(name)!.url}/v1`, max_concurrency: slots },
          ]),
        ),
        models: entries.map(([name]) => ({
          id: `${name}/chat`,
          endpoints: ['chat'],
          context_tokens: 32000,
          max_output_tokens: 1024,
          offerings: [
            {
              provider: name,
              upstream_model: 'sim-chat',
              input_usd_per_mtok: '1',
              output_usd_per_mtok: '2',
            },
          ],
        })),
      },
      env: { MULTIGRID_POLL_MS: '20' },
    })
  })
  afterAll(async () => {
    await gw?.stop()
    for (const sim of sims.values()) await sim.stop()
  })
  return { gateway: () => gw!, sim: (name: string) => sims.get(name)! }
}

async function submit(gw: TestGateway, key: string, hours: number, lines: unknown[]) {
  const answer = await gw.request(`/v1/batches?completion_window_hours=${hours}`, key, {
    method: 'POST',
    headers: { 'content-type': 'application/jsonl' },
    body: jsonl(lines),
  })
  expect(answer.status).toBe(201)
  return ((await answer.json()) as { id: string }).id
}

const read = async (gw: TestGateway, key: string, id: string) =>
  (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
    status: string
    request_counts: { running: number; succeeded: number }
  }

describe('a slow pool', () => {
  const { gateway, sim } = gatewayOver({
    pool: { sim: { latencyMs: 1_000 }, slots: 2 },
    paid: { sim: { latencyMs: 5 }, slots: 64 },
  })

  test("a slow pool's batch leaves the room it cannot use to a batch on an idle provider", async () => {
    const gw = gateway()
    const { key } = await gw.newAccount('10')
    // Due first, so its account's claims go to it first: 200 lines at 2 × 1 s a round.
    const slow = await submit(
      gw,
      key,
      1,
      Array.from({ length: 200 }, (_, i) => chatLine(`slow-${i}`, `q ${i}`, {}, 'pool/chat')),
    )
    await waitFor('the pool to be busy', async () => sim('pool').stats().requests >= 2)
    const started = performance.now()
    const quick = await submit(
      gw,
      key,
      2,
      Array.from({ length: 3 }, (_, i) => chatLine(`quick-${i}`, `q ${i}`, {}, 'paid/chat')),
    )
    await waitFor(
      'the batch on the idle provider',
      async () => (await read(gw, key, quick)).status === 'completed',
    )
    // Behind the pool's queue it would wait for the lines claimed ahead of it: ~50 rounds of 1 s.
    expect(performance.now() - started).toBeLessThan(5_000)
    const waiting = await read(gw, key, slow)
    expect(waiting.status).toBe('in_progress')
    // Claimed here: a first claim's worth, not the whole room of every provider's slots.
    expect(waiting.request_counts.running).toBeLessThanOrEqual(20)
    expect((await gw.request(`/v1/batches/${slow}`, key, { method: 'DELETE' })).status).toBe(200)
  })
})

describe('a batch of two models', () => {
  const { gateway, sim } = gatewayOver({
    // Every call refused 429 with a minute to wait: the provider is paused all the while.
    paused: { sim: { latencyMs: 5, rate429: 1, retryAfterSeconds: 60 }, slots: 4 },
    healthy: { sim: { latencyMs: 5 }, slots: 4 },
  })

  test("one model's provider paused: the batch's other model's lines run all the same", async () => {
    const gw = gateway()
    const { key } = await gw.newAccount('10')
    const lines = Array.from({ length: 40 }, (_, i) =>
      chatLine(`m-${i}`, `q ${i}`, {}, i % 2 === 0 ? 'paused/chat' : 'healthy/chat'),
    )
    const id = await submit(gw, key, 24, lines)
    await waitFor(
      "the healthy model's 20 lines",
      async () => (await read(gw, key, id)).request_counts.succeeded === 20,
      // Well inside the paused provider's minute, yet room for a machine busy with other work.
      30_000,
    )
    expect(sim('paused').stats().requests).toBeGreaterThan(0)
    expect((await gw.request(`/v1/batches/${id}`, key, { method: 'DELETE' })).status).toBe(200)
  })
})
