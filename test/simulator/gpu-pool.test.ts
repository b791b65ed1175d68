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
  sim.configure({ ...defaultSimulatorOptions })
  sim.resetStats()
})

const chat = { model: 'sim-chat', messages: [{ role: 'user', content: 'Hello there' }] }

function call(body: unknown = chat) {
  return fetch(`${sim.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
}

function burst(n: number): Promise<Response>[] {
  return Array.from({ length: n }, () => call())
}

interface Sample {
  name: string
  labels: Record<string, string>
  value: number
}

/** A strict reader of the Prometheus text format: throws on any line it cannot account for. */
function parsePrometheus(text: string): { types: Map<string, string>; samples: Sample[] } {
  const types = new Map<string, string>()
  const samples: Sample[] = []
  const name = '[a-zA-Z_:][a-zA-Z0-9_:]*'
  const sampleLine = new RegExp(`^(${name})(?:\\{(.*)\\})? (\\S+)$`)
  const labelPair = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/gy
  expect(text.endsWith('\n')).toBe(true)
  for (const line of text.slice(0, -1).split('\n')) {
    if (line.startsWith('# HELP ')) {
      expect(line).toMatch(new RegExp(`^# HELP ${name} .+$`))
      continue
    }
    if (line.startsWith('# TYPE ')) {
      const match = new RegExp(`^# TYPE (${name}) (gauge|counter|histogram|summary|untyped)$`).exec(
        line,
      )
      if (!match) throw new Error(`bad TYPE line: ${line}`)
      types.set(match[1], match[2])
      continue
    }
    const match = sampleLine.exec(line)
    if (!match) throw new Error(`bad sample line: ${line}`)
    const labels: Record<string, string> = {}
    const labelText = match[2] ?? ''
    labelPair.lastIndex = 0
    let consumed = 0
    for (let pair = labelPair.exec(labelText); pair; pair = labelPair.exec(labelText)) {
      labels[pair[1]] = pair[2]
      consumed = labelPair.lastIndex
    }
    if (consumed !== labelText.length) throw new Error(`bad labels: ${line}`)
    const value = Number(match[3])
    if (!Number.isFinite(value)) throw new Error(`bad value: ${line}`)
    samples.push({ name: match[1], labels, value })
  }
  return { types, samples }
}

async function gauges(): Promise<Record<string, number>> {
  const response = await fetch(`${sim.url}/metrics`)
  expect(response.status).toBe(200)
  const { samples } = parsePrometheus(await response.text())
  return Object.fromEntries(samples.map((s) => [s.name, s.value]))
}

/** Polls /metrics (at most 100 times, 10 ms apart) until `done` holds; returns what it saw. */
async function waitForGauges(
  done: (g: Record<string, number>) => boolean,
  seen: Record<string, number>[] = [],
): Promise<Record<string, number>> {
  for (let i = 0; i < 100; i++) {
    const g = await gauges()
    seen.push(g)
    if (done(g)) return g
    await Bun.sleep(10)
  }
  throw new Error(`metrics never reached the state: ${JSON.stringify(seen.at(-1))}`)
}

describe('GPU-pool mode', () => {
  test('N requests at capacity C and latency L take about ceil(N/C)·L', async () => {
    const C = 4
    const L = 100
    const N = 14
    sim.configure({ gpuCapacity: C, latencyMs: L })
    const started = performance.now()
    const statuses = await Promise.all(burst(N).map((p) => p.then((r) => r.status)))
    const elapsed = performance.now() - started
    expect(statuses.every((s) => s === 200)).toBe(true)
    // ceil(14/4) = 4 rounds of 100 ms. The lower bound is what the queue guarantees (a timer may
    // fire a millisecond early); the upper one leaves 300 ms for a loaded 2-core machine.
    const ideal = Math.ceil(N / C) * L
    expect(elapsed).toBeGreaterThanOrEqual(ideal - 5)
    expect(elapsed).toBeLessThan(ideal + 300)
  })

  test('never more than C run at once; /metrics shows running = C and waiting = the rest', async () => {
    const C = 3
    const N = 10
    sim.configure({ gpuCapacity: C, latencyMs: 150 })
    const pending = burst(N)
    const seen: Record<string, number>[] = []
    const full = await waitForGauges(
      (g) => g['vllm:num_requests_running'] + g['vllm:num_requests_waiting'] === N,
      seen,
    )
    expect(full['vllm:num_requests_running']).toBe(C)
    expect(full['vllm:num_requests_waiting']).toBe(N - C)
    expect(full['vllm:kv_cache_usage_perc']).toBe(1)
    // Keep watching while the queue drains: the running gauge never passes C.
    await waitForGauges((g) => g['vllm:num_requests_waiting'] === 0, seen)
    const statuses = await Promise.all(pending.map((p) => p.then((r) => r.status)))
    expect(statuses.every((s) => s === 200)).toBe(true)
    for (const g of seen) expect(g['vllm:num_requests_running']).toBeLessThanOrEqual(C)
    const idle = await gauges()
    expect(idle['vllm:num_requests_running']).toBe(0)
    expect(idle['vllm:num_requests_waiting']).toBe(0)
    expect(idle['vllm:kv_cache_usage_perc']).toBe(0)
  })

  test('requests complete in the order they arrived (FIFO)', async () => {
    sim.configure({ gpuCapacity: 1, latencyMs: 15 })
    const order: number[] = []
    // The completion id (chatcmpl-simN) numbers requests in the order the simulator took them.
    await Promise.all(
      burst(10).map(async (p) => {
        const body = (await (await p).json()) as { id: string }
        order.push(Number(body.id.replace('chatcmpl-sim', '')))
      }),
    )
    expect(order).toHaveLength(10)
    expect(order).toEqual([...order].sort((a, b) => a - b))
  })

  test('a burst over C + max-queued gets exactly the overflow as 503s in an OpenAI error body', async () => {
    const C = 2
    const M = 3
    const N = 9
    sim.configure({ gpuCapacity: C, gpuMaxQueued: M, latencyMs: 300 })
    const responses = await Promise.all(burst(N))
    const refused = responses.filter((r) => r.status === 503)
    expect(responses.filter((r) => r.status === 200)).toHaveLength(C + M)
    expect(refused).toHaveLength(N - C - M)
    const body = (await refused[0].json()) as {
      error: { message: string; type: string; code: number }
    }
    expect(body.error.code).toBe(503)
    expect(body.error.type).toBe('ServiceUnavailableError')
    expect(body.error.message).toContain('queue is full')
    expect(sim.stats().byFault.queue_full).toBe(N - C - M)
    expect(sim.stats().byStatus['503']).toBe(N - C - M)
  })

  test('raising capacity while running starts the queued requests at once', async () => {
    sim.configure({ gpuCapacity: 1, latencyMs: 250 })
    const started = performance.now()
    const pending = burst(6)
    await waitForGauges((g) => g['vllm:num_requests_waiting'] === 5)
    sim.configure({ gpuCapacity: 6 })
    const now = await gauges()
    expect(now['vllm:num_requests_running']).toBe(6)
    expect(now['vllm:num_requests_waiting']).toBe(0)
    const statuses = await Promise.all(pending.map((p) => p.then((r) => r.status)))
    const elapsed = performance.now() - started
    expect(statuses.every((s) => s === 200)).toBe(true)
    // At capacity 1 this takes 6 × 250 = 1,500 ms; raised, two rounds (~500 ms) plus slack.
    expect(elapsed).toBeLessThan(1000)
  })

  test('cutting capacity while running lets the running ones finish, then admits fewer', async () => {
    sim.configure({ gpuCapacity: 4, latencyMs: 200 })
    const pending = burst(8)
    await waitForGauges((g) => g['vllm:num_requests_waiting'] === 4)
    sim.configure({ gpuCapacity: 1 })
    const seen: Record<string, number>[] = []
    // Once the first four are done, only one of the rest runs at a time.
    await waitForGauges(
      (g) => g['vllm:num_requests_running'] === 1 && g['vllm:num_requests_waiting'] === 3,
      seen,
    )
    for (const g of seen) expect(g['vllm:num_requests_running']).toBeLessThanOrEqual(4)
    sim.configure({ gpuCapacity: 8 })
    expect((await Promise.all(pending)).every((r) => r.status === 200)).toBe(true)
  })

  test('a client that gives up while waiting leaves the queue and takes no slot', async () => {
    sim.configure({ gpuCapacity: 1, latencyMs: 200 })
    const running = call()
    await waitForGauges((g) => g['vllm:num_requests_running'] === 1)
    const controller = new AbortController()
    const gaveUp = fetch(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(chat),
      signal: controller.signal,
    }).catch((error: Error) => error.name)
    const behind = call()
    await waitForGauges((g) => g['vllm:num_requests_waiting'] === 2)
    controller.abort()
    expect(await gaveUp).toBe('AbortError')
    await waitForGauges((g) => g['vllm:num_requests_waiting'] === 1)
    expect((await running).status).toBe(200)
    expect((await behind).status).toBe(200)
    const idle = await gauges()
    expect(idle['vllm:num_requests_running']).toBe(0)
    expect(idle['vllm:num_requests_waiting']).toBe(0)
  })

  test('/metrics parses as Prometheus text: typed gauges with a model_name label', async () => {
    sim.configure({ gpuCapacity: 2, models: ['pool-model', 'sim-embed'] })
    const response = await fetch(`${sim.url}/metrics`)
    expect(response.headers.get('content-type')).toStartWith('text/plain')
    const { types, samples } = parsePrometheus(await response.text())
    const names = [
      'vllm:num_requests_running',
      'vllm:num_requests_waiting',
      'vllm:kv_cache_usage_perc',
    ]
    for (const name of names) expect(types.get(name)).toBe('gauge')
    expect(samples.map((s) => s.name).sort()).toEqual([...names].sort())
    for (const sample of samples) expect(sample.labels.model_name).toBe('pool-model')
  })

  test('off by default: no queue, no /metrics', async () => {
    sim.configure({ latencyMs: 100 })
    const started = performance.now()
    await Promise.all(burst(8))
    // Unbounded concurrency: one round, nowhere near the 8 rounds a capacity of 1 would take.
    expect(performance.now() - started).toBeLessThan(500)
    expect((await fetch(`${sim.url}/metrics`)).status).toBe(404)
  })

  test('switching the mode off lets every waiter run', async () => {
    sim.configure({ gpuCapacity: 1, latencyMs: 200 })
    const started = performance.now()
    const pending = burst(5)
    await waitForGauges((g) => g['vllm:num_requests_waiting'] === 4)
    sim.configure({ gpuCapacity: null })
    expect((await Promise.all(pending)).every((r) => r.status === 200)).toBe(true)
    expect(performance.now() - started).toBeLessThan(800)
  })
})

const mainPath = `${import.meta.dir}/../../src/simulator/main.ts`

describe('GPU-pool mode from the command line', () => {
  test('--capacity and --max-queued make the process a pool: 503 beyond them, gauges on /metrics', async () => {
    const child = Bun.spawn(
      [
        process.execPath,
        mainPath,
        '--port',
        '0',
        '--capacity',
        '2',
        '--max-queued',
        '1',
        '--latency-ms',
        '300',
      ],
      { stdout: 'pipe', stderr: 'pipe' },
    )
    try {
      const reader = child.stdout.getReader()
      const first = await Promise.race([reader.read(), Bun.sleep(10_000).then(() => null)])
      const line = first?.value ? new TextDecoder().decode(first.value) : ''
      const url = /http:\/\/127\.0\.0\.1:\d+/.exec(line)?.[0]
      expect(url).toBeDefined()
      const send = () =>
        fetch(`${url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(chat),
        })
      const pending = Array.from({ length: 5 }, send)
      let text = ''
      for (let i = 0; i < 100; i++) {
        text = await (await fetch(`${url}/metrics`)).text()
        if (text.includes('vllm:num_requests_waiting{engine="0",model_name="sim-chat"} 1')) break
        await Bun.sleep(10)
      }
      expect(text).toContain('vllm:num_requests_running{engine="0",model_name="sim-chat"} 2')
      expect(text).toContain('vllm:num_requests_waiting{engine="0",model_name="sim-chat"} 1')
      const statuses = (await Promise.all(pending)).map((r) => r.status).sort()
      expect(statuses).toEqual([200, 200, 200, 503, 503])
    } finally {
      child.kill()
      await child.exited
    }
  })

  test('a fractional --capacity is refused with a message naming the flag', async () => {
    const child = Bun.spawn([process.execPath, mainPath, '--port', '0', '--capacity', '2.5'], {
      stdout: 'pipe',
      stderr: 'pipe',
    })
    const timer = setTimeout(() => child.kill(), 10_000)
    expect(await child.exited).toBe(2)
    clearTimeout(timer)
    expect(await new Response(child.stderr).text()).toContain('--capacity must be a whole number')
  })
})
