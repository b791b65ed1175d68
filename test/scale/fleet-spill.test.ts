/**
 * The spill planner in a fleet (docs/routing.md): two gateway processes on one PostgreSQL and one Redis
 * run one batch against a free GPU pool (the simulator in GPU-pool mode, its max_concurrency
 * shared through Redis) and a paid provider listed before it. Each instance measures only its own
 * share of the pool's rate and holds only its own lines there; planning from that alone, each
 * read the pool as half as fast as it is and spilled lines the pool could still finish (measured:
 * 69–89 of 400 with a window of 1.5× what the pool needs). With the figures shared
 * (src/coordination/fleet-rates.ts) the fleet spills what one instance would.
 */
import { expect, test } from 'bun:test'
import { startSimulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl } from '../helpers/gateway.ts'
import { describeScale, startFleet } from './fleet.ts'

const MODEL = 'sim/planned'
const POOL_SLOTS = 4
const LATENCY_MS = 100
/** Lines per second the pool completes, for the whole fleet. */
const POOL_RATE = (POOL_SLOTS * 1000) / LATENCY_MS
const TOTAL = 400

const offering = (provider: string, price: string) => ({
  provider,
  upstream_model: 'sim-chat',
  input_usd_per_mtok: price,
  output_usd_per_mtok: price,
})

/** Runs the batch on a fresh fleet with its window shortened to `windowS`: where its lines went. */
async function runInFleet(windowS: number) {
  const paid = await startSimulator({ latencyMs: LATENCY_MS })
  const pool = await startSimulator({ gpuCapacity: POOL_SLOTS, latencyMs: LATENCY_MS })
  const provider = (url: string, concurrency: number) => ({
    kind: 'openai',
    base_url: `${url}/v1`,
    max_concurrency: concurrency,
    timeout_s: 5,
  })
  const fleet = await startFleet({
    instances: 2,
    openai: `${paid.url}/v1`,
    catalog: {
      providers: { paid: provider(paid.url, 32), pool: provider(pool.url, POOL_SLOTS) },
      models: [
        {
          id: MODEL,
          endpoints: ['chat'],
          context_tokens: 32000,
          max_output_tokens: 4096,
          offerings: [offering('paid', '0.15'), offering('pool', '0')],
        },
      ],
    },
    env: { MULTIGRID_POLL_MS: '20' },
  })
  try {
    const { key } = await fleet.newAccount('100')
    const body = jsonl(
      Array.from({ length: TOTAL }, (_, i) => chatLine(`l${i}`, `question ${i}`, {}, MODEL)),
    )
    const response = await fleet.submit(0, key, body)
    expect(response.status).toBe(201)
    const { id } = (await response.json()) as { id: string }
    await fleet.sql`UPDATE batches SET deadline_at = created_at + ${windowS} WHERE id = ${id}`
    // Which instances hold its lines while it runs: both must, for the share to be what is tested.
    const owners = new Set<string>()
    let running = true
    const sampling = (async () => {
      while (running) {
        const rows = await fleet.sql`
          SELECT DISTINCT lease_owner FROM lines WHERE batch_id = ${id} AND status = 'running'`
        for (const r of rows) owners.add(r.lease_owner)
        await Bun.sleep(100)
      }
    })()
    const batch = await fleet.waitDone(key, id, 40_000).finally(() => (running = false))
    await sampling
    expect(owners.size).toBe(2)
    expect(batch.status).toBe('completed')
    const [row] = await fleet.sql`
      SELECT b.created_at, b.deadline_at, b.finished_at,
        count(*) FILTER (WHERE l.provider = 'paid')::int AS spilled,
        count(*) FILTER (WHERE l.provider = 'pool')::int AS on_pool
      FROM batches b JOIN lines l ON l.batch_id = b.id
      WHERE b.id = ${id} GROUP BY b.created_at, b.deadline_at, b.finished_at`
    const finishedS = Number(row.finished_at) - Number(row.created_at)
    console.log(
      `fleet spill, ${windowS} s window: ${row.spilled} of ${TOTAL} lines to the paid provider, ${row.on_pool} on the pool, finished at ${finishedS} s`,
    )
    expect(row.spilled + row.on_pool).toBe(TOTAL)
    expect(pool.stats().byPath['/v1/chat/completions']).toBe(row.on_pool)
    return {
      spilled: row.spilled as number,
      inTime: Number(row.finished_at) <= Number(row.deadline_at),
    }
  } catch (error) {
    fleet.failed()
    throw error
  } finally {
    await fleet.stop()
    await paid.stop()
    await pool.stop()
  }
}

/**
 * Two gateways, two simulators and PostgreSQL on two cores: how soon each instance learns the
 * other's rate moves with the box's load, and on a busy one a run now and then spills past these
 * bounds, on the code before this session too (measured: 6 of 9 runs back to back). A run that
 * meets the bound is what is asserted, so each test may run twice more.
 */
const RETRIES = { retry: 2 }

describeScale('scale: the planner in a fleet', () => {
  test(
    'two instances sharing a pool that can finish in time spill next to nothing: the planner adds the other instance’s rate',
    async () => {
      // The pool alone needs 10 s; a 15 s window leaves it 13.5 s before the margin, so no line
      // needs to spill. Bound: 15% of the batch, for the first answers and the first exchange of
      // figures (once a second): a tenth left no room (52 on an idle CI run), while planning
      // without the other instance's figures spilled 69–89.
      const { spilled, inTime } = await runInFleet(15)
      expect(spilled).toBeLessThanOrEqual(TOTAL * 0.15)
      expect(inTime).toBe(true)
    },
    RETRIES,
  )

  test(
    'two instances sharing a pool that cannot finish in time still spill enough, and finish inside the window',
    async () => {
      // 7 s: the pool can do 280 lines at most, so at least 120 must go to the paid provider.
      const windowS = 7
      const fewest = TOTAL - POOL_RATE * windowS
      const { spilled, inTime } = await runInFleet(windowS)
      expect(spilled).toBeGreaterThanOrEqual(fewest)
      // At most 3 s of the pool more than that (the one-instance test allows 2.5 s): two instances
      // learn each other's rate once a second, and runs of the code before this bound spilled
      // 190-210 of the 220 allowed by 2.5 s, so that bound left no room for a busy machine.
      expect(spilled).toBeLessThanOrEqual(fewest + POOL_RATE * 3)
      expect(inTime).toBe(true)
    },
    RETRIES,
  )
})
