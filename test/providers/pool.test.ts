import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createProvider } from '../../providers/index.ts'
import type { Outcome, ProviderAdapter } from '../../providers/types.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'

/** The request an adapter is handed: the upstream model is the body's own, as these tests write it. */
const forUpstream = <T extends { body: Record<string, unknown> }>(request: T) => ({
  ...request,
  model: String(request.body.model),
})

const body = { model: 'sim-chat', messages: [{ role: 'user', content: 'Hello there' }] }

async function waitFor(check: () => boolean, withinMs: number): Promise<boolean> {
  const until = performance.now() + withinMs
  while (performance.now() < until) {
    if (check()) return true
    await Bun.sleep(10)
  }
  return check()
}

describe('a pool of three replicas', () => {
  const sims: Simulator[] = []
  let pool: ProviderAdapter
  const send = (count: number): Promise<Outcome[]> =>
    Promise.all(
      Array.from({ length: count }, () => pool.send(forUpstream({ endpoint: 'chat', body }))),
    )
  const served = () => sims.map((sim) => sim.stats().byPath['/v1/chat/completions'] ?? 0)
  const resetAll = () => sims.forEach((sim) => sim.resetStats())

  beforeAll(async () => {
    for (let i = 0; i < 3; i++) sims.push(await startSimulator({ latencyMs: 10 }))
    pool = createProvider({
      name: 'gpu-pool',
      kind: 'openai',
      baseUrls: sims.map((sim) => `${sim.url}/v1`),
      apiKey: null,
      timeoutMs: 2_000,
      connections: 8,
      probeIntervalMs: 50,
    })
  })
  afterAll(async () => {
    await pool.close()
    await Promise.all(sims.map((sim) => sim.stop()))
  })

  test('spreads calls over the replicas with the fewest in flight', async () => {
    const outcomes = await send(30)
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true)
    const counts = served()
    expect(counts.reduce((a, b) => a + b)).toBe(30)
    for (const count of counts) expect(count).toBe(10)
  })

  test('a stopped replica: every call still answered, the replica marked, then probed back in', async () => {
    const victim = sims[1]
    const victimBase = `${victim.url}/v1`
    await victim.stop()
    resetAll()
    for (let round = 0; round < 3; round++) {
      const outcomes = await send(10)
      expect(outcomes.filter((outcome) => !outcome.ok)).toEqual([])
    }
    expect(pool.unhealthyReplicas()).toEqual([victimBase])
    // The others answer: the provider as a whole is reachable.
    expect(pool.unreachable()).toBe(false)
    expect(served()[0] + served()[2]).toBe(30)

    sims[1] = await startSimulator({ port: victim.port, latencyMs: 10 })
    expect(await waitFor(() => pool.unhealthyReplicas().length === 0, 2_000)).toBe(true)
    const outcomes = await send(30)
    expect(outcomes.every((outcome) => outcome.ok)).toBe(true)
    expect(sims[1].stats().byPath['/v1/chat/completions']).toBeGreaterThan(0)
  })

  test('three 5xx in a row take a replica out until a probe finds it answering', async () => {
    // Its own pool with a slower probe, so the sick replica stays out while the test looks.
    const slowProbe = createProvider({
      name: 'gpu-pool-2',
      kind: 'openai',
      baseUrls: sims.map((sim) => `${sim.url}/v1`),
      apiKey: null,
      timeoutMs: 2_000,
      connections: 8,
      probeIntervalMs: 300,
    })
    const sick = sims[2]
    sick.configure({ errorRate: 1 })
    try {
      // Sequential calls rotate over the replicas, so the sick one sees every third call.
      let failures = 0
      for (let i = 0; i < 9 && slowProbe.unhealthyReplicas().length === 0; i++) {
        const outcome = await slowProbe.send(forUpstream({ endpoint: 'chat', body }))
        if (!outcome.ok) failures++
      }
      expect(failures).toBe(3)
      expect(slowProbe.unhealthyReplicas()).toEqual([`${sick.url}/v1`])
      expect(slowProbe.unreachable()).toBe(false)
      sick.resetStats()
      const outcomes = await Promise.all(
        Array.from({ length: 12 }, () => slowProbe.send(forUpstream({ endpoint: 'chat', body }))),
      )
      expect(outcomes.every((outcome) => outcome.ok)).toBe(true)
      expect(sick.stats().byPath['/v1/chat/completions'] ?? 0).toBe(0)
      // Its /v1/models still answers (faults hit inference only), so the probe brings it back.
      sick.configure({ errorRate: 0 })
      expect(await waitFor(() => slowProbe.unhealthyReplicas().length === 0, 2_000)).toBe(true)
    } finally {
      sick.configure({ errorRate: 0 })
      await slowProbe.close()
    }
  })

  test('a lone replica answering 5xx is out but not unreachable; one failing its probe is', async () => {
    const single = await startSimulator({ errorRate: 1 })
    const lone = createProvider({
      name: 'lone-5xx',
      kind: 'openai',
      baseUrls: [`${single.url}/v1`],
      apiKey: null,
      timeoutMs: 1_000,
      connections: 2,
      // Slow enough that it is still out when the simulator stops below.
      probeIntervalMs: 500,
    })
    try {
      for (let i = 0; i < 3; i++) await lone.send(forUpstream({ endpoint: 'chat', body }))
      expect(lone.unhealthyReplicas()).toEqual([`${single.url}/v1`])
      // It answers: its 5xx are the retry policy's to pace, not an outage.
      expect(lone.unreachable()).toBe(false)
      await single.stop()
      expect(lone.unhealthyReplicas()).toEqual([`${single.url}/v1`])
      // The next probe finds nothing there.
      expect(await waitFor(() => lone.unreachable(), 2_000)).toBe(true)
    } finally {
      await lone.close()
    }
  })

  test('every replica out: calls still try them, and the first success brings one back', async () => {
    const single = await startSimulator()
    const lone = createProvider({
      name: 'lone',
      kind: 'openai',
      baseUrls: [`${single.url}/v1`],
      apiKey: null,
      timeoutMs: 1_000,
      connections: 2,
      probeIntervalMs: 60_000,
    })
    await single.stop()
    let again: Simulator | null = null
    try {
      const refused = await lone.send(forUpstream({ endpoint: 'chat', body }))
      expect(refused).toMatchObject({ ok: false, error: { kind: 'connection', retryable: true } })
      expect(lone.unhealthyReplicas()).toEqual([`${single.url}/v1`])
      // Its only replica refused the connection: the provider is unreachable until it answers.
      expect(lone.unreachable()).toBe(true)
      // Long before the next probe, the replica is back and is used.
      again = await startSimulator({ port: single.port })
      expect((await lone.send(forUpstream({ endpoint: 'chat', body }))).ok).toBe(true)
      expect(lone.unhealthyReplicas()).toEqual([])
      expect(lone.unreachable()).toBe(false)
    } finally {
      await lone.close()
      await again?.stop()
    }
  })
})

describe('a replica killed mid-request', () => {
  test('the calls it held are answered by the others, each prompt sent at most twice', async () => {
    const sims = await Promise.all([0, 1, 2].map(() => startSimulator({ latencyMs: 80 })))
    const pool = createProvider({
      name: 'gpu-pool-3',
      kind: 'openai',
      baseUrls: sims.map((sim) => `${sim.url}/v1`),
      apiKey: null,
      timeoutMs: 2_000,
      connections: 16,
      probeIntervalMs: 1_000,
    })
    try {
      const calls = Array.from({ length: 30 }, (_, i) =>
        pool.send(
          forUpstream({
            endpoint: 'chat',
            body: { model: 'sim-chat', messages: [{ role: 'user', content: `line ${i}` }] },
          }),
        ),
      )
      await Bun.sleep(30)
      const held = sims[0].stats().inFlight
      await sims[0].stop()
      const outcomes = await Promise.all(calls)
      expect(held).toBeGreaterThan(0)
      expect(outcomes.filter((outcome) => !outcome.ok)).toEqual([])
      const counts = [sims[1].stats(), sims[2].stats()]
      expect(counts[0].requests + counts[1].requests).toBe(30)
      expect(Math.max(counts[0].maxPromptCount, counts[1].maxPromptCount)).toBe(1)
    } finally {
      await pool.close()
      await Promise.all(sims.map((sim) => sim.stop()))
    }
  })
})
