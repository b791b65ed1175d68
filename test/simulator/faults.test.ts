import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import { defaultSimulatorOptions } from '../../src/simulator/options.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'

let sim: Simulator

beforeAll(async () => {
  sim = await startSimulator()
})
afterAll(async () => {
  await sim.stop()
})
afterEach(() => {
  // Back to a well-behaved upstream; port and hostname cannot change anyway.
  sim.configure({ ...defaultSimulatorOptions })
  sim.resetStats()
})

const chat = { model: 'sim-chat', messages: [{ role: 'user', content: 'Hello there' }] }

function call(body: unknown = chat, signal?: AbortSignal, base = sim.url) {
  return fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  })
}

describe('429s', () => {
  test('Retry-After: whole seconds alone, fractions also as retry-after-ms, null as none', async () => {
    sim.configure({ rate429: 1, retryAfterSeconds: 2 })
    const whole = await call()
    expect(whole.status).toBe(429)
    expect(whole.headers.get('retry-after')).toBe('2')
    expect(whole.headers.get('retry-after-ms')).toBeNull()
    expect(((await whole.json()) as { error: { code: string } }).error.code).toBe(
      'rate_limit_exceeded',
    )

    sim.configure({ retryAfterSeconds: 0.25 })
    const fraction = await call()
    expect(fraction.headers.get('retry-after-ms')).toBe('250')
    expect(fraction.headers.get('retry-after')).toBe('1')

    sim.configure({ retryAfterSeconds: null })
    expect((await call()).headers.get('retry-after')).toBeNull()
    const stats = sim.stats()
    expect(stats.rateLimitedAt).toHaveLength(3)
    expect(stats.byFault.rate_limited).toBe(3)
  })

  test('maxConcurrency answers 429 beyond the cap', async () => {
    sim.configure({ maxConcurrency: 2, latencyMs: 60 })
    const statuses = await Promise.all(
      Array.from({ length: 5 }, () => call().then((r) => r.status)),
    )
    expect(statuses.filter((s) => s === 200)).toHaveLength(2)
    expect(statuses.filter((s) => s === 429)).toHaveLength(3)
    expect(sim.stats().byFault.concurrency_cap).toBe(3)
  })

  test('maxRequestsPerSecond answers 429 once the second is spent', async () => {
    sim.configure({ maxRequestsPerSecond: 5 })
    const statuses: number[] = []
    for (let i = 0; i < 8; i++) statuses.push((await call()).status)
    expect(statuses.slice(0, 5)).toEqual([200, 200, 200, 200, 200])
    expect(statuses.slice(5)).toEqual([429, 429, 429])
  })
})

describe('seeded faults', () => {
  test('the same seed replays the same pattern', async () => {
    const pattern = async (target: Simulator) => {
      const statuses: number[] = []
      for (let i = 0; i < 30; i++) statuses.push((await call(chat, undefined, target.url)).status)
      return statuses
    }
    const other = await startSimulator({ seed: 42, errorRate: 0.5 })
    sim.configure({ seed: 42, errorRate: 0.5 })
    try {
      const first = await pattern(sim)
      expect(await pattern(other)).toEqual(first)
      expect(first.filter((s) => s === 500).length).toBeGreaterThan(5)
      expect(first.filter((s) => s === 200).length).toBeGreaterThan(5)
    } finally {
      await other.stop()
    }
  })

  test('errorRate answers 500 in the vendor envelope', async () => {
    sim.configure({ errorRate: 1 })
    const response = await call()
    expect(response.status).toBe(500)
    expect(((await response.json()) as { error: { type: string } }).error.type).toBe('server_error')
  })
})

describe('broken answers', () => {
  test('timeoutRate hangs until the client gives up', async () => {
    sim.configure({ timeoutRate: 1 })
    const started = performance.now()
    const error = await call(chat, AbortSignal.timeout(150)).catch((e: Error) => e)
    expect(error).toBeInstanceOf(Error)
    expect(performance.now() - started).toBeGreaterThanOrEqual(140)
    await Bun.sleep(20)
    expect(sim.stats().inFlight).toBe(0)
    expect(sim.stats().byFault.timeout).toBe(1)
  })

  test('resetRate sends 200 and part of the body, then drops the connection', async () => {
    sim.configure({ resetRate: 1 })
    const response = await call()
    expect(response.status).toBe(200)
    expect(await response.text().catch((e: Error & { code?: string }) => e.code)).toBe('ECONNRESET')
  })

  test('malformedRate answers 200 with a body that is not JSON', async () => {
    sim.configure({ malformedRate: 1 })
    const response = await call()
    expect(response.status).toBe(200)
    const text = await response.text()
    expect(() => JSON.parse(text)).toThrow()
    const streamed = await (await call({ ...chat, stream: true })).text()
    expect(streamed).toStartWith('data: {')
    expect(() => JSON.parse(streamed.slice(6))).toThrow()
  })

  test('noUsageRate leaves usage out, streamed or not', async () => {
    sim.configure({ noUsageRate: 1 })
    const body = (await (await call()).json()) as Record<string, unknown>
    expect(body.choices).toBeDefined()
    expect(body.usage).toBeUndefined()
    const request = { ...chat, stream: true, stream_options: { include_usage: true } }
    const streamed = await (await call(request)).text()
    expect(streamed).not.toContain('"prompt_tokens"')
  })

  test('trickleRate sends a valid body slowly', async () => {
    sim.configure({ trickleRate: 1, trickleMs: 250 })
    const started = performance.now()
    const body = (await (await call()).json()) as { usage: unknown }
    expect(body.usage).toBeDefined()
    expect(performance.now() - started).toBeGreaterThanOrEqual(200)
  })
})

describe('stop and restart', () => {
  test('stop() closes active connections at once; a new one can take the port', async () => {
    const replica = await startSimulator({ timeoutRate: 1 })
    const pending = call(chat, undefined, replica.url).then(
      (response) => response.text(),
      (error: Error) => error,
    )
    await Bun.sleep(30)
    const started = performance.now()
    await replica.stop()
    expect(await pending).toBeInstanceOf(Error)
    expect(performance.now() - started).toBeLessThan(500)
    expect(await call(chat, undefined, replica.url).catch((e: Error) => e)).toBeInstanceOf(Error)

    const again = await startSimulator({ port: replica.port })
    try {
      expect(again.url).toBe(replica.url)
      expect((await call(chat, undefined, again.url)).status).toBe(200)
    } finally {
      await again.stop()
    }
  })
})
