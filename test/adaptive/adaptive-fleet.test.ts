/**
 * Adaptive concurrency behind the fleet-wide gate (REDIS_URL): two gateway instances share one
 * Redis semaphore (max_concurrency stays the fleet's ceiling there) and each keeps its own working
 * point per replica. What the replica shows (its queue, its latency) includes both instances'
 * load, so they back off together: its queue stays short and it is kept busy.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { startTestGateway, TEST_REDIS_URL } from '../helpers/gateway.ts'
import { submitBatch } from './pool-batches.ts'

describe('adaptive concurrency with the fleet gate (Redis)', () => {
  if (!TEST_REDIS_URL) {
    test.skip('needs TEST_REDIS_URL, e.g. redis://127.0.0.1:6379', () => {})
    return
  }
  const stops: (() => Promise<void>)[] = []
  afterAll(async () => {
    for (const stop of stops.reverse()) await stop()
  })

  test('two instances on one replica (C = 8): queue ≤ 8 deep, ~2 on average; throughput within 20% of C ÷ latency', async () => {
    const C = 8
    const latencyMs = 50
    const replica: Simulator = await startSimulator({ gpuCapacity: C, latencyMs })
    stops.push(() => replica.stop())
    const base = testCatalog({ openai: `${replica.url}/v1` }, { maxConcurrency: 64 })
    const catalog = {
      ...base,
      providers: { ...base.providers, sim: { ...base.providers.sim, adaptive_concurrency: true } },
    }
    const prefix = `mg-test-${Math.random().toString(36).slice(2, 10)}:`
    const env = {
      REDIS_URL: TEST_REDIS_URL!,
      MULTIGRID_REDIS_PREFIX: prefix,
      MULTIGRID_POLL_MS: '20',
    }
    const gateways = [
      await startTestGateway({ catalog, env }),
      await startTestGateway({ catalog, env }),
    ]
    for (const gw of gateways) stops.push(() => gw.stop())

    const waiting: number[] = []
    let sampling = true
    const sampler = (async () => {
      for (let i = 0; i < 1_000 && sampling; i++) {
        const text = await (await fetch(`${replica.url}/metrics`)).text()
        waiting.push(Number(/^vllm:num_requests_waiting\{[^}]*\} (\S+)$/m.exec(text)?.[1]))
        await Bun.sleep(50)
      }
    })()
    // 8 ÷ 0.05 s = 160 lines/s for the two together: 1,200 lines take 7.5 s at best.
    const started = performance.now()
    const batches = await Promise.all(
      gateways.map(async (gw) => (await (await submitBatch(gw, 600)).finished()).batch),
    )
    const seconds = (performance.now() - started) / 1000
    sampling = false
    await sampler

    for (const batch of batches) expect(batch.request_counts).toMatchObject({ succeeded: 600 })
    expect(1_200 / seconds).toBeGreaterThanOrEqual((C / (latencyMs / 1000)) * 0.8)
    expect(replica.stats().peakWaiting).toBeLessThanOrEqual(C)
    // Past the first 2 s (40 samples) and before the tail.
    const steady = waiting.slice(40, -20)
    expect(steady.length).toBeGreaterThan(20)
    expect(steady.reduce((a, b) => a + b, 0) / steady.length).toBeLessThanOrEqual(3)
    for (const gw of gateways) {
      const point = Object.values(gw.upstreams.health().sim.working_points!)[0]
      expect(point).toBeLessThanOrEqual(C + 4)
    }
  }, 30_000)
})
