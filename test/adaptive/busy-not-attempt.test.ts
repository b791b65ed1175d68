/**
 * A vLLM replica answering 503 because its queue is full is busy, not broken (docs/routing.md): the line
 * goes to another replica or waits, the 503 is not one of its attempts, and the replica is not
 * taken out of the pool for it. Over real HTTP against simulator replicas in GPU-pool mode with
 * `max_queued` 0 (every request beyond the running ones is answered 503), with
 * MULTIGRID_MAX_ATTEMPTS=1, so a single counted 503 would fail its line.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { startSimulator } from '../../src/simulator/server.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { poolCatalog, submitBatch } from './pool-batches.ts'

type Result = { status: string; attempts: number; error: unknown }

async function runBatch(gw: TestGateway, lines: number) {
  const { id, key, finished } = await submitBatch(gw, lines)
  const { batch } = await finished(15_000)
  const text = await (await gw.request(`/v1/batches/${id}/results`, key)).text()
  const results = text
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Result)
  return { batch, results }
}

describe('a full queue answers 503: busy, not an attempt', () => {
  const cleanup: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const stop of cleanup.splice(0).reverse()) await stop()
  })

  for (const adaptive of [false, true]) {
    test(`one replica${adaptive ? ' (adaptive)' : ''}: lines with max attempts 1 all succeed after 503s, each on its first attempt`, async () => {
      const replica = await startSimulator({ gpuCapacity: 2, gpuMaxQueued: 0, latencyMs: 50 })
      cleanup.push(() => replica.stop())
      const gw = await startTestGateway({
        catalog: poolCatalog([replica], adaptive, 8),
        env: { MULTIGRID_POLL_MS: '20', MULTIGRID_MAX_ATTEMPTS: '1' },
      })
      cleanup.push(() => gw.stop())
      const { batch, results } = await runBatch(gw, 40)
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toMatchObject({ succeeded: 40, failed: 0 })
      expect(results.every((r) => r.status === 'succeeded' && r.attempts === 1)).toBe(true)
      // A call sent again after 503s is one call: nothing is left counted as running.
      expect(batch.routing.providers.sim).toMatchObject({ succeeded: 40, running: 0 })
      const stats = replica.stats()
      // Busy answers were met (8 sent at once to a replica that runs 2; adaptive starts at 4).
      expect(stats.byStatus['503']).toBeGreaterThan(0)
      // Every line answered once (/metrics reads, when adaptive, are 200s too: not counted).
      expect(stats.byPath['/v1/chat/completions'] - stats.byStatus['503']).toBe(40)
      expect(gw.upstreams.health().sim.unhealthy_replicas).toEqual([])
    }, 20_000)
  }

  test('two replicas: the busy one stays in the pool and its 503s go to the other', async () => {
    const busy = await startSimulator({ gpuCapacity: 1, gpuMaxQueued: 0, latencyMs: 50 })
    const roomy = await startSimulator({ gpuCapacity: 8, latencyMs: 50 })
    cleanup.push(async () => void (await Promise.all([busy.stop(), roomy.stop()])))
    const gw = await startTestGateway({
      catalog: poolCatalog([busy, roomy], false, 8),
      env: { MULTIGRID_POLL_MS: '20', MULTIGRID_MAX_ATTEMPTS: '1' },
    })
    cleanup.push(() => gw.stop())
    // Watch the pool's health while the batch runs: three 503s in a row used to take a replica out.
    let everOut = false
    let watching = true
    const watch = (async () => {
      for (let i = 0; i < 1_000 && watching; i++) {
        if (gw.upstreams.health().sim.unhealthy_replicas.length > 0) everOut = true
        await Bun.sleep(10)
      }
    })()
    const { batch, results } = await runBatch(gw, 120)
    watching = false
    await watch
    expect(batch.request_counts).toMatchObject({ succeeded: 120, failed: 0 })
    expect(results.every((r) => r.attempts === 1)).toBe(true)
    expect(busy.stats().byStatus['503']).toBeGreaterThan(3)
    // Still in rotation: it kept serving what it had room for.
    expect(busy.stats().byStatus['200']).toBeGreaterThan(5)
    expect(everOut).toBe(false)
    // What the busy one refused went to the other.
    expect(roomy.stats().byStatus['200']).toBe(120 - busy.stats().byStatus['200'])
    expect(roomy.stats().byStatus['503'] ?? 0).toBe(0)
  }, 20_000)
})
