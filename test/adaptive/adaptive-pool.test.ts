/**
 * Adaptive concurrency over real HTTP (docs/routing.md): a gateway whose pool provider has
 * `adaptive_concurrency: true` and a max_concurrency far above what its simulator replicas (GPU-pool
 * mode: capacity C at a fixed latency, FIFO queue behind) can run. The working point keeps each
 * replica's queue short while the batch runs at the replicas' throughput, and follows a capacity
 * changed while it runs.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { poolCatalog, submitBatch } from './pool-batches.ts'

async function runBatch(gw: TestGateway, lines: number) {
  return (await submitBatch(gw, lines)).finished()
}

/** Reads a replica's /metrics every `everyMs` until stopped: its running and waiting gauges. */
function sampleGauges(sim: Simulator, everyMs = 50) {
  const samples: { at: number; running: number; waiting: number }[] = []
  let stopped = false
  const loop = (async () => {
    const start = performance.now()
    for (let i = 0; i < 2_000 && !stopped; i++) {
      const text = await (await fetch(`${sim.url}/metrics`)).text()
      const gauge = (name: string) =>
        Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm').exec(text)?.[1])
      samples.push({
        at: performance.now() - start,
        running: gauge('vllm:num_requests_running'),
        waiting: gauge('vllm:num_requests_waiting'),
      })
      await Bun.sleep(everyMs)
    }
  })()
  return {
    samples,
    async stop() {
      stopped = true
      await loop
    },
  }
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length)

describe('adaptive concurrency for a pool', () => {
  const cleanup: (() => Promise<void>)[] = []
  afterEach(async () => {
    for (const stop of cleanup.splice(0).reverse()) await stop()
  })

  test('keeps each replica queue at most 6 deep (C = 8, ~1.5 on average) and the batch within 15% of C ÷ latency; without it, 24 wait', async () => {
    const C = 8
    const latencyMs = 100
    const replicas = [
      await startSimulator({ gpuCapacity: C, latencyMs }),
      await startSimulator({ gpuCapacity: C, latencyMs }),
    ]
    cleanup.push(async () => void (await Promise.all(replicas.map((r) => r.stop()))))
    const gw = await startTestGateway({
      catalog: poolCatalog(replicas, true),
      env: { MULTIGRID_POLL_MS: '20' },
    })
    cleanup.push(() => gw.stop())

    // 2 replicas × 8 ÷ 0.1 s = 160 lines/s: 1,200 lines take 7.5 s at best.
    const lines = 1_200
    const gauges = replicas.map((replica) => sampleGauges(replica))
    const { batch, seconds } = await runBatch(gw, lines)
    for (const g of gauges) await g.stop()
    expect(batch.status).toBe('completed')
    expect(batch.request_counts.succeeded).toBe(lines)
    const ideal = (replicas.length * C) / (latencyMs / 1000)
    expect(lines / seconds).toBeGreaterThanOrEqual(ideal * 0.85)
    for (const replica of replicas) {
      // The whole run, slow start's overshoot (at most C/2 + 1) included; max_concurrency 64
      // without adaptive concurrency queues 24 on each (below).
      expect(replica.stats().peakWaiting).toBeLessThanOrEqual(6)
      expect(replica.stats().byStatus['503'] ?? 0).toBe(0)
    }
    for (const g of gauges) {
      // Steady state (past the first 2 s, before the last second's tail): the replica is kept
      // busy (≥ 90% of C running on average) with a queue of about the allowance (2) behind it.
      const steady = g.samples.filter((s) => s.at > 2_000 && s.at < (seconds - 1) * 1000)
      expect(steady.length).toBeGreaterThan(20)
      expect(mean(steady.map((s) => s.running))).toBeGreaterThanOrEqual(C * 0.9)
      expect(mean(steady.map((s) => s.waiting))).toBeLessThanOrEqual(2.5)
    }
    const points = gw.upstreams.health().sim.working_points!
    for (const point of Object.values(points)) {
      expect(point).toBeGreaterThanOrEqual(C)
      expect(point).toBeLessThanOrEqual(C + 4)
    }

    // The same pool without adaptive concurrency: max_concurrency (64) spread over the two.
    for (const replica of replicas) replica.resetStats()
    const plain = await startTestGateway({
      catalog: poolCatalog(replicas, false),
      env: { MULTIGRID_POLL_MS: '20' },
    })
    cleanup.push(() => plain.stop())
    await runBatch(plain, 300)
    expect(Math.max(...replicas.map((r) => r.stats().peakWaiting))).toBeGreaterThanOrEqual(20)
  }, 40_000)

  test('follows a capacity change while it runs: 8 → 3 keeps the queue short, 3 → 12 is used', async () => {
    const latencyMs = 100
    const replica = await startSimulator({ gpuCapacity: 8, latencyMs })
    cleanup.push(() => replica.stop())
    const gw = await startTestGateway({
      catalog: poolCatalog([replica], true),
      env: { MULTIGRID_POLL_MS: '20' },
    })
    cleanup.push(() => gw.stop())
    const gauges = sampleGauges(replica)
    // More than the 11 s below can run (≈ 840 lines): cancelled once they are measured.
    const run = await submitBatch(gw, 1_400)
    const point = () => gw.upstreams.health().sim.working_points![`${replica.url}/v1`]

    await Bun.sleep(3_000)
    expect(point()).toBeGreaterThanOrEqual(8)
    replica.configure({ gpuCapacity: 3 })
    await Bun.sleep(4_000)
    const down = point()
    replica.configure({ gpuCapacity: 12 })
    await Bun.sleep(4_000)
    const up = point()
    await gauges.stop()
    expect((await run.cancel()).status).toBe(200)
    expect((await run.finished()).batch.status).toBe('cancelled')

    // Down: within 4 s the working point is back near 3, and over its last 2 s the queue is short.
    expect(down).toBeGreaterThanOrEqual(3)
    expect(down).toBeLessThanOrEqual(3 + 3)
    const lastOfDown = gauges.samples.filter((s) => s.at > 5_000 && s.at < 7_000)
    expect(Math.max(...lastOfDown.map((s) => s.waiting))).toBeLessThanOrEqual(3)
    expect(mean(lastOfDown.map((s) => s.running))).toBeGreaterThanOrEqual(2.7)
    // Up: the new capacity is found and used (≥ 90% of 12 running over the phase's last 2 s).
    expect(up).toBeGreaterThanOrEqual(12)
    const lastOfUp = gauges.samples.filter((s) => s.at > 9_000 && s.at < 11_000)
    expect(mean(lastOfUp.map((s) => s.running))).toBeGreaterThanOrEqual(12 * 0.9)
    expect(Math.max(...lastOfUp.map((s) => s.waiting))).toBeLessThanOrEqual(4)
  }, 40_000)
})
