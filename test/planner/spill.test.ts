/**
 * The planner of docs/routing.md over real HTTP: a free GPU pool (the simulator in GPU-pool mode, 4
 * slots × 100 ms: 40 lines/s) and a paid provider (a plain simulator) listed BEFORE it in the
 * catalog, so that where a line went is what each simulator received. Windows are whole hours;
 * the short ones are made by moving an admitted batch's deadline in the store
 * (helpers/shorten-window.ts).
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { shortenWindow } from '../helpers/shorten-window.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'
import { nativeClient } from '../helpers/native-client.ts'

const MODEL = 'sim/planned'
const POOL_SLOTS = 4
const LATENCY_MS = 100
/** Lines per second the pool completes. */
const POOL_RATE = (POOL_SLOTS * 1000) / LATENCY_MS

function catalog(paidUrl: string, poolUrl: string) {
  return {
    providers: {
      paid: { kind: 'openai', base_url: `${paidUrl}/v1`, max_concurrency: 32, timeout_s: 5 },
      pool: {
        kind: 'openai',
        base_url: `${poolUrl}/v1`,
        max_concurrency: POOL_SLOTS,
        timeout_s: 5,
      },
    },
    models: [
      {
        id: MODEL,
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 4096,
        offerings: [
          {
            provider: 'paid',
            upstream_model: 'sim-chat',
            input_usd_per_mtok: '0.15',
            output_usd_per_mtok: '0.60',
          },
          {
            provider: 'pool',
            upstream_model: 'sim-chat',
            input_usd_per_mtok: '0',
            output_usd_per_mtok: '0',
          },
        ],
      },
    ],
  }
}

interface Batch {
  id: string
  status: string
  created_at: number
  deadline_at: number
  finished_at: number | null
  request_counts: Record<string, number>
  cost_usd: string
  routing: { providers: Record<string, { succeeded: number; running: number }>; eta: number | null }
  waiting: { code: string; message: string } | null
}
interface Row {
  custom_id: string
  status: string
  provider: string | null
  attempts: number
  cost_usd: string
}

const lines = (count: number, provider?: Record<string, unknown>) =>
  Array.from({ length: count }, (_, i) =>
    chatLine(`l${i}`, `question ${i}`, provider ? { provider } : {}, MODEL),
  )

const inference = (sim: Simulator) => sim.stats().byPath['/v1/chat/completions'] ?? 0

for (const storeKind of STORES) {
  describe(`spill planner (${storeKind})`, () => {
    let paid: Simulator
    let pool: Simulator
    let gw: TestGateway
    let key: string

    beforeAll(async () => {
      paid = await startSimulator({ latencyMs: LATENCY_MS })
      pool = await startSimulator({ gpuCapacity: POOL_SLOTS, latencyMs: LATENCY_MS })
      gw = await startTestGateway({
        store: storeKind,
        catalog: catalog(paid.url, pool.url),
        env: { MULTIGRID_POLL_MS: '20', MULTIGRID_MAX_ATTEMPTS: '3' },
      })
      ;({ key } = await gw.newAccount('100', { rate_limit_per_minute: 100_000 }))
    })
    afterEach(() => {
      paid.resetStats()
      pool.resetStats()
    })
    afterAll(async () => {
      await gw?.stop()
      await paid?.stop()
      await pool?.stop()
    })

    const { submit, read, finished, results } = nativeClient<Batch, Row>(
      () => gw,
      () => key,
    )
    const count = (rows: Row[], provider: string) =>
      rows.filter((row) => row.provider === provider).length

    test('an ample window runs every line on the free pool, none on the paid provider listed before it', async () => {
      const created = await submit(jsonl(lines(60)))
      expect(created.routing).toEqual({ providers: {}, eta: null })
      const batch = await finished(created.id)
      const rows = await results(batch.id)
      expect(rows.every((row) => row.status === 'succeeded' && row.provider === 'pool')).toBe(true)
      expect(inference(paid)).toBe(0)
      expect(inference(pool)).toBe(60)
      expect(new Decimal(batch.cost_usd).isZero()).toBe(true)
    })

    test('a window the pool cannot meet spills about the lines it cannot finish, early, and finishes in time', async () => {
      const total = 400
      const windowS = 6
      const created = await submit(jsonl(lines(total)))
      const submittedAt = Date.now()
      await shortenWindow(gw, created.id, windowS)
      let eta: number | null = null
      const batch = await waitFor(
        `batch ${created.id} to finish`,
        async () => {
          const now = await read(created.id)
          eta ??= now.routing.eta
          return FINAL_BATCH.includes(now.status) ? now : null
        },
        30_000,
        50,
      )
      const rows = await results(batch.id)
      expect(batch.status).toBe('completed')
      expect(rows.every((row) => row.status === 'succeeded')).toBe(true)
      // Inside its window: finished no later than the (whole-second) deadline.
      expect(batch.finished_at!).toBeLessThanOrEqual(batch.deadline_at)
      // The fewest lines any schedule must spill: what the pool cannot do from the submit to the
      // deadline. The bound held: at most 100 lines (2.5 s of the pool) more than that, which
      // covers the margin (10% of the window: 24 lines), the lines decided before the window was
      // shortened and the first answers it takes to measure the pool.
      const poolWindowS = batch.deadline_at - submittedAt / 1000
      const fewest = Math.max(0, Math.ceil(total - POOL_RATE * poolWindowS))
      const spilled = count(rows, 'paid')
      console.log(
        `spill: ${spilled} of ${total} lines to the paid provider; at least ${fewest} must go, the pool did ${count(rows, 'pool')}`,
      )
      expect(spilled).toBeGreaterThanOrEqual(fewest)
      expect(spilled).toBeLessThanOrEqual(fewest + 100)
      expect(spilled + count(rows, 'pool')).toBe(total)
      // Early: nine in ten spilled lines were sent in the first half of the window (from the
      // submit; the first answers are measured within half a second), every one before the
      // margin (a few may go late, when the pool's rate dips past its noise).
      const arrivals = paid.stats().arrivals
      const half = submittedAt + (poolWindowS * 1000) / 2
      expect(arrivals.filter((at) => at < half).length).toBeGreaterThanOrEqual(0.9 * spilled)
      expect(arrivals.every((at) => at < (batch.deadline_at - 0.1 * windowS) * 1000)).toBe(true)
      // The planner projected a finish while it ran.
      expect(eta).not.toBeNull()
    })

    test('a pool that dies mid-batch is spilled around: its lines use no attempts, none is lost', async () => {
      const total = 300
      const created = await submit(jsonl(lines(total)))
      await waitFor('a third of the lines on the pool', async () => inference(pool) >= 100)
      const port = pool.port
      await pool.stop()
      const stoppedAt = Date.now()
      try {
        const batch = await finished(created.id)
        const rows = await results(batch.id)
        expect(batch.status).toBe('completed')
        expect(rows.every((row) => row.status === 'succeeded')).toBe(true)
        expect(rows.every((row) => row.attempts === 1)).toBe(true)
        expect(count(rows, 'pool')).toBeGreaterThanOrEqual(90)
        expect(count(rows, 'paid')).toBeGreaterThan(0)
        // Nothing went to the paid provider while the pool was up.
        expect(paid.stats().arrivals.every((at) => at >= stoppedAt - 50)).toBe(true)
      } finally {
        pool = await startSimulator({ port, gpuCapacity: POOL_SLOTS, latencyMs: LATENCY_MS })
      }
    })

    test('allow_fallbacks false: the pool alone, no spill, even when the window is too short', async () => {
      const total = 240
      const created = await submit(jsonl(lines(total, { allow_fallbacks: false })))
      await shortenWindow(gw, created.id, 3)
      const batch = await finished(created.id)
      const rows = await results(batch.id)
      expect(inference(paid)).toBe(0)
      expect(rows.every((row) => row.provider === 'pool' || row.provider === null)).toBe(true)
      // The pool could not do them all (40 lines/s for at most 3 s): the rest expired unsent.
      expect(batch.status).toBe('expired')
      expect(rows.filter((row) => row.status === 'expired').length).toBeGreaterThan(0)
      expect(rows.filter((row) => row.status === 'succeeded').length).toBeLessThanOrEqual(
        POOL_RATE * 3 + POOL_SLOTS,
      )
    })

    test('allow_fallbacks false and the pool down: its lines wait without using attempts, and run when a probe brings it back', async () => {
      const total = 120
      const created = await submit(jsonl(lines(total, { allow_fallbacks: false })))
      await waitFor('some lines on the pool', async () => inference(pool) >= 20)
      const port = pool.port
      await pool.stop()
      // Down for longer than the retry policy's backoff of three attempts.
      await Bun.sleep(2_000)
      const waiting = await gw.store.readLines(created.id, {
        afterLineNo: 0,
        limit: total,
        statuses: ['pending'],
      })
      expect(waiting.length).toBeGreaterThan(0)
      expect(waiting.every((line) => line.attempts === 0)).toBe(true)
      // And the batch says why it does not move.
      const held = await waitFor('the batch to say it waits', async () => {
        const batch = await read(created.id)
        return batch.waiting?.code === 'provider_unavailable' ? batch : null
      })
      expect(held.waiting!.message).toContain('pool')
      pool = await startSimulator({ port, gpuCapacity: POOL_SLOTS, latencyMs: LATENCY_MS })
      // The replica's probe runs every 5 s.
      const batch = await finished(created.id, 20_000)
      const rows = await results(batch.id)
      expect(batch.status).toBe('completed')
      expect(rows.every((row) => row.status === 'succeeded' && row.provider === 'pool')).toBe(true)
      expect(rows.every((row) => row.attempts === 1)).toBe(true)
      expect(inference(paid)).toBe(0)
      expect(batch.waiting).toBeNull()
    })

    test('lines queued behind another batch’s at a full pool: capacity_busy, then they run', async () => {
      pool.configure({ latencyMs: 1_500 })
      try {
        // The first batch fills the pool (4 slots and a round waiting: no more of it is claimed,
        // docs/routing.md); the second, of another account, waits behind that round at the
        // pool's gate, allowed the pool alone, for longer than the 1 s between projections.
        const first = await submit(jsonl(lines(12, { allow_fallbacks: false })))
        await waitFor('the pool to be busy', async () => inference(pool) >= POOL_SLOTS)
        const other = await gw.newAccount('100', { rate_limit_per_minute: 100_000 })
        const response = await gw.request('/v1/batches', other.key, {
          method: 'POST',
          body: jsonl(lines(4, { allow_fallbacks: false })),
          headers: { 'content-type': 'application/jsonl' },
        })
        const second = (await response.json()) as Batch
        const busy = await waitFor('the second batch to wait on capacity', async () => {
          const batch = (await (
            await gw.request(`/v1/batches/${second.id}`, other.key)
          ).json()) as Batch
          return batch.waiting ? batch : null
        })
        expect(busy.waiting!.code).toBe('capacity_busy')
        expect(busy.waiting!.message).toContain('pool')
        const done = await waitFor(
          'the second batch to finish',
          async () => {
            const batch = (await (
              await gw.request(`/v1/batches/${second.id}`, other.key)
            ).json()) as Batch
            return FINAL_BATCH.includes(batch.status) ? batch : null
          },
          30_000,
        )
        expect(done.status).toBe('completed')
        expect(done.waiting).toBeNull()
        await finished(first.id)
      } finally {
        pool.configure({ latencyMs: LATENCY_MS })
      }
    })
  })
}

/**
 * A batch none of whose lines can be claimed at all, the instance's room taken by an earlier
 * batch's lines (docs/routing.md, why a batch waits): capacity_busy too, though no line of it
 * waits at a gate the planner sees; cleared when its lines run.
 */
for (const storeKind of STORES) {
  describe(`waiting unclaimed (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 1_000 })
      // Two slots: three lines in flight at most (the slots and half again), all the first batch's.
      const small = catalog(sim.url, sim.url)
      small.providers = { pool: { ...small.providers.pool, max_concurrency: 2 } } as never
      small.models[0]!.offerings = [small.models[0]!.offerings[1]!]
      gw = await startTestGateway({
        store: storeKind,
        catalog: small,
        env: { MULTIGRID_POLL_MS: '20' },
      })
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    test('a later batch none of whose lines could be claimed waits capacity_busy, then runs', async () => {
      const { key } = await gw.newAccount('100', { rate_limit_per_minute: 100_000 })
      const { submit, read, finished } = nativeClient<Batch, Row>(
        () => gw,
        () => key,
      )
      const urgent = await gw.request('/v1/batches?completion_window_hours=1', key, {
        method: 'POST',
        body: jsonl(lines(12)),
        headers: { 'content-type': 'application/jsonl' },
      })
      expect(urgent.status).toBe(201)
      const first = (await urgent.json()) as Batch
      await waitFor('the first batch to take the room', async () => {
        const batch = await read(first.id)
        return batch.request_counts.running === 3
      })
      const second = await submit(jsonl(lines(6)))
      const busy = await waitFor('the second batch to say it waits', async () => {
        const batch = await read(second.id)
        return batch.waiting ? batch : null
      })
      expect(busy.request_counts).toMatchObject({ pending: 6, running: 0 })
      expect(busy.waiting!.code).toBe('capacity_busy')
      expect(busy.waiting!.message).toContain('pool')
      // The first cancelled, the second runs, and its reason is gone while it does.
      await gw.request(`/v1/batches/${first.id}`, key, { method: 'DELETE' })
      await waitFor('the second batch to run without a reason', async () => {
        const batch = await read(second.id)
        expect(batch.status).toBe('in_progress')
        return batch.request_counts.running > 0 && batch.waiting === null
      })
      const done = await finished(second.id, 20_000)
      expect(done.status).toBe('completed')
      expect(done.waiting).toBeNull()
    }, 30_000)
  })
}
