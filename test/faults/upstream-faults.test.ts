/**
 * Upstream faults from the simulator: 500s, 429s with and without Retry-After, timeouts, resets
 * mid-body, malformed bodies, bodies without usage, trickling bodies. Every line ends in a final
 * state with an honest error code, nothing hangs past its timeout, a throttling provider is paced,
 * and what is billed is exactly what was recorded.
 */
import { describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { openaiMessageTexts, promptKey } from '../../src/simulator/reply.ts'
import {
  startSimulator,
  type Simulator,
  type SimulatorOptions,
} from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

interface Batch {
  id: string
  status: string
  request_counts: Record<string, number>
  cost_usd: string
  cost_ceiling_usd: string
}
interface Row {
  custom_id: string
  status: string
  response: { status_code: number; body: any } | null
  error: { code: string; message: string } | null
  cost_usd: string
  attempts: number
  latency_ms: number | null
}

interface Setup {
  timeoutS?: number
  maxAttempts?: number
  concurrency?: number
}

/** A simulator with `faults`, and a gateway in front of it with a fresh account. */
async function scenario(faults: SimulatorOptions, setup: Setup = {}) {
  const sim = await startSimulator({ seed: 11, ...faults })
  const catalog = testCatalog(
    { openai: `${sim.url}/v1`, anthropic: 'http://127.0.0.1:9' },
    {
      maxConcurrency: setup.concurrency ?? 8,
      timeoutS: setup.timeoutS ?? 5,
    },
  )
  // The simulator answers any upstream model named ctx-overflow… with a context-length 400.
  catalog.models.push({
    id: 'sim/ctx',
    endpoints: ['chat'],
    context_tokens: 8192,
    max_output_tokens: 1024,
    offerings: [
      {
        provider: 'sim',
        upstream_model: 'ctx-overflow',
        input_usd_per_mtok: '0.50',
        output_usd_per_mtok: '1.50',
      },
    ],
  } as never)
  const gw = await startTestGateway({
    catalog,
    env: { MULTIGRID_POLL_MS: '20', MULTIGRID_MAX_ATTEMPTS: String(setup.maxAttempts ?? 3) },
  })
  const { key, accountId } = await gw.newAccount('10', { rate_limit_per_minute: 100_000 })
  return new Scenario(sim, gw, key, accountId)
}

class Scenario {
  constructor(
    readonly sim: Simulator,
    readonly gw: TestGateway,
    readonly key: string,
    readonly accountId: string,
  ) {}

  async submit(lines: unknown[]) {
    const response = await this.gw.request('/v1/batches', this.key, {
      method: 'POST',
      body: jsonl(lines),
    })
    expect(response.status).toBe(201)
    return (await response.json()) as Batch
  }

  finished(id: string, timeoutMs = 30_000) {
    return waitFor(
      `batch ${id} to finish`,
      async () => {
        const batch = (await (await this.gw.request(`/v1/batches/${id}`, this.key)).json()) as Batch
        return FINAL_BATCH.includes(batch.status) ? batch : null
      },
      timeoutMs,
      25,
    )
  }

  async results(id: string) {
    const text = await (await this.gw.request(`/v1/batches/${id}/results`, this.key)).text()
    return text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Row)
  }

  live(body: Record<string, unknown>) {
    return this.gw.request('/v1/chat/completions', this.key, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    })
  }

  /** Every line final, nothing held, and the account charged exactly the sum of line costs. */
  async assertSettled(batch: Batch, rows: Row[], credit = '10') {
    expect(batch.request_counts.pending + batch.request_counts.running).toBe(0)
    expect(
      rows.every((row) => ['succeeded', 'failed', 'cancelled', 'expired'].includes(row.status)),
    ).toBe(true)
    const sum = rows.reduce((total, row) => total.plus(row.cost_usd), new Decimal(0))
    const account = (await (await this.gw.admin(`/accounts/${this.accountId}`)).json()) as Record<
      string,
      string
    >
    expect(account.held_usd).toBe('0.000000')
    expect(new Decimal(credit).minus(account.balance_usd).equals(sum)).toBe(true)
    expect(new Decimal(batch.cost_usd).equals(sum)).toBe(true)
  }

  async stop() {
    await this.gw.stop()
    await this.sim.stop()
  }
}

const lines = (prefix: string, count: number, extra: Record<string, unknown> = {}) =>
  Array.from({ length: count }, (_, i) => chatLine(`${prefix}-${i}`, `${prefix} line ${i}`, extra))

/** Arrival times grouped into bursts (gaps under 300 ms); the gaps between bursts, in ms. */
function burstGaps(arrivals: number[]) {
  const gaps: number[] = []
  for (let i = 1; i < arrivals.length; i++)
    if (arrivals[i] - arrivals[i - 1] >= 300) gaps.push(arrivals[i] - arrivals[i - 1])
  return gaps
}

describe('upstream faults', () => {
  test('500s: retried to the attempt limit, then failed upstream_error naming the status', async () => {
    const s = await scenario({ errorRate: 1 }, { maxAttempts: 3 })
    try {
      const batch = await s.finished((await s.submit(lines('e500', 10))).id)
      const rows = await s.results(batch.id)
      for (const row of rows) {
        expect(row).toMatchObject({ status: 'failed', attempts: 3, cost_usd: '0.000000' })
        expect(row.error!.code).toBe('upstream_error')
        expect(row.error!.message).toContain('500')
        expect(row.error!.message).toContain('3 attempts')
      }
      // Each line went upstream exactly as often as it was tried.
      expect(s.sim.stats().maxPromptCount).toBe(3)
      expect(s.sim.stats().byStatus['500']).toBe(30)
      await s.assertSettled(batch, rows)
      const live = await s.live(chatLine('l').body)
      expect(live.status).toBe(502)
      expect(((await live.json()) as any).error.code).toBe('upstream_error')
    } finally {
      await s.stop()
    }
  })

  test('refusals are never retried and keep their own codes', async () => {
    const s = await scenario({}, { maxAttempts: 3 })
    try {
      const batch = await s.finished(
        (
          await s.submit([
            chatLine('bad-1', 'x', {}, 'sim/refused'),
            chatLine('ctx-1', 'x', {}, 'sim/ctx'),
            chatLine('ok-1', 'x'),
          ])
        ).id,
      )
      const rows = Object.fromEntries(
        (await s.results(batch.id)).map((row) => [row.custom_id, row]),
      )
      expect(rows['bad-1']).toMatchObject({
        status: 'failed',
        attempts: 1,
        error: { code: 'invalid_request' },
      })
      expect(rows['ctx-1']).toMatchObject({
        status: 'failed',
        attempts: 1,
        error: { code: 'context_length_exceeded' },
      })
      expect(rows['ok-1'].status).toBe('succeeded')
      await s.assertSettled(batch, Object.values(rows))
    } finally {
      await s.stop()
    }
  })

  test('a provider that refuses every connection is unavailable: its line waits and uses no attempt', async () => {
    const s = await scenario({}, { maxAttempts: 2 })
    try {
      // Anthropic's base URL is a closed port here: every call is a connection error.
      const batch = await s.submit([chatLine('conn-1', 'x', {}, 'sim/claude')])
      const seen: { status: string; attempts: number }[] = []
      // Long enough for many attempts' worth of backoff and for the line to be claimed again
      // after each time it was handed back (every second).
      for (let i = 0; i < 12; i++) {
        await Bun.sleep(250)
        const [line] = await s.gw.store.readLines(batch.id, {
          afterLineNo: 0,
          limit: 1,
          statuses: null,
        })
        seen.push({ status: line.status, attempts: line.attempts })
      }
      // Pending between claims, running (its claim's attempt counted) only while it is looked at.
      for (const line of seen) {
        expect(['pending', 'running']).toContain(line.status)
        expect(line.attempts).toBeLessThanOrEqual(1)
      }
      expect(seen.some((line) => line.status === 'pending' && line.attempts === 0)).toBe(true)
      await s.gw.request(`/v1/batches/${batch.id}`, s.key, { method: 'DELETE' })
      const ended = await s.finished(batch.id)
      expect(ended.status).toBe('cancelled')
      await s.assertSettled(ended, await s.results(batch.id))
      // A live call to it is told the provider is out of reach and what to do, not only the socket's error.
      const live = await s.live(chatLine('l', 'x', {}, 'sim/claude').body)
      expect(live.status).toBe(502)
      const { error } = (await live.json()) as { error: { code: string; message: string } }
      expect(error.code).toBe('upstream_error')
      expect(error.message).toContain('the provider could not be reached')
      expect(error.message).toContain('nothing was billed')
    } finally {
      await s.stop()
    }
  })

  test("a provider that refuses the gateway's key: a live call is told to tell the operator, and never sees the key", async () => {
    const s = await scenario({ requireApiKey: 'a-key-the-gateway-does-not-have' })
    try {
      const live = await s.live(chatLine('l').body)
      expect(live.status).toBe(502)
      const text = await live.text()
      const { error } = JSON.parse(text) as { error: { code: string; message: string } }
      expect(error.code).toBe('upstream_error')
      expect(error.message).toContain("the provider refused the gateway's key for it")
      expect(error.message).toContain("tell the gateway's operator")
      expect(text).not.toContain('a-key-the-gateway-does-not-have')
    } finally {
      await s.stop()
    }
  })

  test('timeouts: a hanging upstream is given up after timeout_s, every line ends, nothing hangs', async () => {
    const s = await scenario({ timeoutRate: 1 }, { timeoutS: 0.5, maxAttempts: 2 })
    try {
      const started = Date.now()
      const batch = await s.finished((await s.submit(lines('hang', 6))).id, 15_000)
      const elapsed = Date.now() - started
      // Two attempts of 0.5 s each plus at most 0.25 s of backoff, with room for a busy machine.
      expect(elapsed).toBeLessThan(4_000)
      const rows = await s.results(batch.id)
      for (const row of rows) {
        expect(row).toMatchObject({
          status: 'failed',
          attempts: 2,
          error: { code: 'upstream_error' },
        })
        expect(row.error!.message).toContain('no complete answer within 500 ms')
        expect(row.latency_ms!).toBeGreaterThanOrEqual(450)
        expect(row.latency_ms!).toBeLessThan(1_500)
      }
      await s.assertSettled(batch, rows)
      expect(s.sim.stats().inFlight).toBe(0) // the gateway hung up on every hanging request
      const liveStarted = Date.now()
      const live = await s.live(chatLine('l').body)
      expect(live.status).toBe(504)
      expect(((await live.json()) as any).error.code).toBe('upstream_timeout')
      expect(Date.now() - liveStarted).toBeLessThan(2_000)
    } finally {
      await s.stop()
    }
  })

  test('connection resets mid-body: retried, then failed upstream_error', async () => {
    const s = await scenario({ resetRate: 1 }, { maxAttempts: 2 })
    try {
      const batch = await s.finished((await s.submit(lines('reset', 6))).id)
      const rows = await s.results(batch.id)
      for (const row of rows) {
        expect(row).toMatchObject({
          status: 'failed',
          attempts: 2,
          error: { code: 'upstream_error' },
        })
        expect(row.error!.message).toMatch(/connection|closed|reset|socket/i)
      }
      await s.assertSettled(batch, rows)
      expect((await s.live(chatLine('l').body)).status).toBe(502)
    } finally {
      await s.stop()
    }
  })

  test('malformed JSON bodies: retried, then failed upstream_error saying so', async () => {
    const s = await scenario({ malformedRate: 1 }, { maxAttempts: 2 })
    try {
      const batch = await s.finished((await s.submit(lines('garbled', 6))).id)
      const rows = await s.results(batch.id)
      for (const row of rows) {
        expect(row).toMatchObject({
          status: 'failed',
          attempts: 2,
          error: { code: 'upstream_error' },
        })
        expect(row.error!.message).toContain('not a JSON object')
      }
      await s.assertSettled(batch, rows)
      expect((await s.live(chatLine('l').body)).status).toBe(502)
    } finally {
      await s.stop()
    }
  })

  test('bodies without usage: succeeded, billed on the byte bound, never above the ceiling', async () => {
    const s = await scenario({ noUsageRate: 1 })
    try {
      const submitted = lines('nousage', 20)
      const batch = await s.finished((await s.submit(submitted)).id)
      const rows = await s.results(batch.id)
      submitted.forEach((line, i) => {
        const row = rows[i]
        expect(row.status).toBe('succeeded')
        expect(row.response!.body.usage).toBeUndefined()
        // Prompt: the UTF-8 bytes of the body sent + 4 per message + 3; reply: one token per byte,
        // capped at max_tokens.
        const input = Buffer.byteLength(JSON.stringify({ ...line.body, model: 'sim-chat' })) + 7
        const output = Math.min(
          Buffer.byteLength(row.response!.body.choices[0].message.content),
          32,
        )
        const expected = new Decimal(input)
          .times('0.5')
          .plus(new Decimal(output).times('1.5'))
          .div(1e6)
        expect(new Decimal(row.cost_usd).equals(expected)).toBe(true)
      })
      await s.assertSettled(batch, rows)
      expect(new Decimal(batch.cost_usd).lessThanOrEqualTo(batch.cost_ceiling_usd)).toBe(true)
    } finally {
      await s.stop()
    }
  })

  test('slow trickling bodies: within the timeout they succeed, past it they time out', async () => {
    const slow = await scenario({ trickleRate: 1, trickleMs: 600 }, { timeoutS: 3 })
    try {
      const batch = await slow.finished((await slow.submit(lines('trickle', 8))).id)
      const rows = await slow.results(batch.id)
      for (const row of rows) {
        expect(row).toMatchObject({ status: 'succeeded', attempts: 1 })
        expect(row.latency_ms!).toBeGreaterThanOrEqual(500)
      }
      await slow.assertSettled(batch, rows)
    } finally {
      await slow.stop()
    }
    const slower = await scenario(
      { trickleRate: 1, trickleMs: 3_000 },
      { timeoutS: 0.6, maxAttempts: 2 },
    )
    try {
      const started = Date.now()
      const batch = await slower.finished((await slower.submit(lines('drip', 4))).id, 15_000)
      expect(Date.now() - started).toBeLessThan(4_000)
      const rows = await slower.results(batch.id)
      for (const row of rows) {
        expect(row).toMatchObject({
          status: 'failed',
          attempts: 2,
          error: { code: 'upstream_error' },
        })
        expect(row.error!.message).toContain('no complete answer within 600 ms')
        expect(row.latency_ms!).toBeLessThan(1_500)
      }
      await slower.assertSettled(batch, rows)
    } finally {
      await slower.stop()
    }
  })

  test('transient faults of every kind: each line succeeds within the retry budget, billed once', async () => {
    const s = await scenario(
      {
        errorRate: 0.08,
        rate429: 0.05,
        retryAfterSeconds: 0.05,
        resetRate: 0.06,
        malformedRate: 0.06,
        timeoutRate: 0.03,
        noUsageRate: 0.05,
        trickleRate: 0.05,
        trickleMs: 200,
      },
      { timeoutS: 1, maxAttempts: 8, concurrency: 16 },
    )
    try {
      const batch = await s.finished((await s.submit(lines('mixed', 150))).id, 60_000)
      const rows = await s.results(batch.id)
      expect(batch.request_counts).toMatchObject({ total: 150, succeeded: 150, failed: 0 })
      expect(Math.max(...rows.map((r) => r.attempts))).toBeGreaterThan(1)
      const faults = s.sim.stats().byFault
      for (const kind of [
        'server_error',
        'rate_limited',
        'reset',
        'malformed',
        'timeout',
        'no_usage',
        'trickle',
      ] as const) {
        expect(faults[kind] ?? 0).toBeGreaterThan(0)
      }
      // A line went upstream once per attempt, never more.
      const counts = s.sim.stats().promptCounts
      const extra = rows.filter((row) => {
        const key = promptKey(
          openaiMessageTexts([
            { role: 'user', content: `mixed line ${row.custom_id.slice('mixed-'.length)}` },
          ]),
        )
        return (counts[key] ?? 0) > row.attempts
      })
      expect(extra.map((row) => row.custom_id)).toEqual([])
      await s.assertSettled(batch, rows)
    } finally {
      await s.stop()
    }
  })
})

describe('a provider that answers 429 is paced', () => {
  /**
   * Runs `count` lines while the simulator answers only 429 for `phaseMs`, then lets them through.
   * Returns what arrived during the 429 phase.
   */
  async function throttled(retryAfterSeconds: number | null, count: number, phaseMs: number) {
    const s = await scenario({ rate429: 1, retryAfterSeconds }, { concurrency: 4, maxAttempts: 20 })
    try {
      const created = await s.submit(lines(`throttle-${retryAfterSeconds}`, count))
      await waitFor('first 429', async () => s.sim.stats().rateLimitedAt.length > 0)
      const start = s.sim.stats().arrivals[0]
      await Bun.sleep(phaseMs)
      const phase = s.sim.stats()
      s.sim.configure({ rate429: 0 })
      const batch = await s.finished(created.id, 30_000)
      expect(batch.request_counts).toMatchObject({ total: count, succeeded: count })
      const rows = await s.results(batch.id)
      expect(Math.max(...rows.map((r) => r.attempts))).toBeGreaterThan(1)
      await s.assertSettled(batch, rows)
      const arrivals = phase.arrivals.filter((t) => t <= start + phaseMs)
      return { arrivals, rateLimitedAt: phase.rateLimitedAt, seconds: phaseMs / 1000 }
    } finally {
      await s.stop()
    }
  }

  test('after a 429 with Retry-After: 1, nothing is sent to the provider for a second', async () => {
    const { arrivals, rateLimitedAt, seconds } = await throttled(1, 12, 3_500)
    const perSecond = arrivals.length / seconds
    console.log(
      `429 with Retry-After: 1 — ${arrivals.length} requests in ${seconds} s (${perSecond.toFixed(1)}/s), gaps between bursts ${burstGaps(arrivals).join(', ')} ms`,
    )
    // Only the requests already on their way when a 429 came back (one burst of at most the
    // provider's concurrency) may arrive right after it; then a second of silence.
    const early: string[] = []
    for (const limited of rateLimitedAt) {
      for (const arrival of arrivals) {
        const after = arrival - limited
        if (after > 300 && after < 900) early.push(`${after} ms after a 429`)
      }
    }
    expect(early).toEqual([])
    expect(burstGaps(arrivals).every((gap) => gap >= 900)).toBe(true)
    // Bursts of at most 4 (the concurrency), about a second apart.
    expect(perSecond).toBeLessThanOrEqual(6)
  })

  test('after a 429 without Retry-After, the provider is still paused rather than hammered', async () => {
    const { arrivals, seconds } = await throttled(null, 12, 3_000)
    const perSecond = arrivals.length / seconds
    let busiest = 0
    for (const start of arrivals)
      busiest = Math.max(busiest, arrivals.filter((t) => t >= start && t < start + 1000).length)
    console.log(
      `429 without Retry-After — ${arrivals.length} requests in ${seconds} s (${perSecond.toFixed(1)}/s), busiest second ${busiest}`,
    )
    expect(perSecond).toBeLessThanOrEqual(8)
    expect(busiest).toBeLessThanOrEqual(12)
  })

  test('a provider capped at 20 requests/s: the gateway settles near the cap instead of flooding it', async () => {
    const s = await scenario(
      { maxRequestsPerSecond: 20, retryAfterSeconds: 1 },
      { concurrency: 8, maxAttempts: 20 },
    )
    try {
      const started = Date.now()
      const batch = await s.finished((await s.submit(lines('capped', 80))).id, 30_000)
      const seconds = (Date.now() - started) / 1000
      expect(batch.request_counts).toMatchObject({ total: 80, succeeded: 80 })
      const stats = s.sim.stats()
      const limited = stats.byStatus['429'] ?? 0
      const sent = stats.arrivals.length
      console.log(
        `capped at 20/s — 80 lines in ${seconds.toFixed(1)} s, ${sent} requests, ${limited} answered 429`,
      )
      // Paced: most requests get through; a flood would be answered 429 many times over.
      expect(limited).toBeLessThanOrEqual(80)
      await s.assertSettled(batch, await s.results(batch.id))
    } finally {
      await s.stop()
    }
  })
})
