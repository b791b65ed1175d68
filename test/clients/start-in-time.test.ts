/**
 * Starting in time (docs/open-models.md): a batch none of whose lines has started by half its window (by
 * 48 hours for a window of 72 hours or more) ends `failed` with capacity_unavailable, nothing
 * run, its hold released, nothing charged; the facade shows the same errors entry. With no
 * dispatcher (MULTIGRID_DISPATCH=0) no line ever starts, and the batches are aged in the store.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { laneCatalog } from '../helpers/lane-catalog.ts'
import { openStoreFile } from '../helpers/store-file.ts'
import { waitFor } from '../helpers/wait.ts'

/** Moves a batch's creation and deadline `seconds` into the past, in the gateway's own store. */
async function age(gw: TestGateway, batchId: string, seconds: number) {
  if (gw.env.DATABASE_URL) {
    const { default: postgres } = await import('postgres')
    const sql = postgres(gw.env.DATABASE_URL, { max: 1, onnotice: () => {} })
    try {
      await sql`UPDATE batches SET created_at = created_at - ${seconds},
        deadline_at = deadline_at - ${seconds} WHERE id = ${batchId}`
    } finally {
      await sql.end()
    }
    return
  }
  const db = openStoreFile(gw.env.MULTIGRID_DATA_DIR)
  try {
    db.query(
      'UPDATE batches SET created_at = created_at - ?, deadline_at = deadline_at - ? WHERE id = ?',
    ).run(seconds, seconds, batchId)
  } finally {
    db.close()
  }
}

/** How many progress shards of the batch the store holds (an ended batch is its row alone). */
async function shardsOf(gw: TestGateway, batchId: string): Promise<number> {
  if (gw.env.DATABASE_URL) {
    const { default: postgres } = await import('postgres')
    const sql = postgres(gw.env.DATABASE_URL, { max: 1, onnotice: () => {} })
    try {
      const [row] =
        await sql`SELECT count(*)::int AS n FROM batch_progress WHERE batch_id = ${batchId}`
      return row.n
    } finally {
      await sql.end()
    }
  }
  const db = openStoreFile(gw.env.MULTIGRID_DATA_DIR)
  try {
    const row = db
      .query<{ n: number }, [string]>('SELECT count(*) AS n FROM batch_progress WHERE batch_id = ?')
      .get(batchId)
    return row!.n
  } finally {
    db.close()
  }
}

const HOUR = 3600

/** A batch of two chat lines with this window; its id. */
async function submitPair(gw: TestGateway, key: string, hours: number): Promise<string> {
  const response = await gw.request(`/v1/batches?completion_window_hours=${hours}`, key, {
    method: 'POST',
    headers: { 'content-type': 'application/jsonl' },
    body: jsonl([chatLine('a'), chatLine('b')]),
  })
  expect(response.status).toBe(201)
  return ((await response.json()) as { id: string }).id
}

/** The native batch object, as far as these tests read it. */
const readBatch = async (gw: TestGateway, key: string, id: string) =>
  (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
    status: string
    started_at: number | null
    cost_usd: string
    waiting: { code: string } | null
    errors: { code: string }[] | null
    request_counts: { running: number; succeeded: number; failed: number }
  }

for (const store of STORES) {
  describe(store, () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await startTestGateway({
        store,
        env: { MULTIGRID_DISPATCH: '0', MULTIGRID_CREDIT_WAIT_POLL_MS: '100' },
      })
    })
    afterAll(() => gw.stop())

    const submit = (key: string, hours: number) => submitPair(gw, key, hours)
    const read = (key: string, id: string) => readBatch(gw, key, id)
    const account = async (id: string) =>
      (await (await gw.admin(`/accounts/${id}`)).json()) as {
        balance_usd: string
        held_usd: string
      }

    test('unstarted by half its window: failed capacity_unavailable, nothing held or charged', async () => {
      const { key, accountId } = await gw.newAccount('5')
      const id = await submit(key, 24)
      expect(Number((await account(accountId)).held_usd)).toBeGreaterThan(0)
      await age(gw, id, 12 * HOUR + 5)
      const failed = await waitFor('the batch to fail', async () => {
        const batch = await read(key, id)
        return batch.status === 'failed' ? batch : null
      })
      expect(failed.request_counts.failed).toBe(2)
      expect(failed.cost_usd).toBe('0.000000')
      const after = await account(accountId)
      expect(Number(after.held_usd)).toBe(0)
      expect(Number(after.balance_usd)).toBe(5)
      const results = (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { status: string; error: { code: string } })
      expect(results.map((r) => [r.status, r.error.code])).toEqual([
        ['failed', 'capacity_unavailable'],
        ['failed', 'capacity_unavailable'],
      ])
      const facade = (await (await gw.request(`/openai/v1/batches/${id}`, key)).json()) as {
        status: string
        errors: { data: { code: string }[] }
      }
      expect(facade.status).toBe('failed')
      expect(facade.errors.data[0].code).toBe('capacity_unavailable')
    })

    test('a 72-hour window has 48 hours to start, not 36', async () => {
      const { key } = await gw.newAccount('5')
      const early = await submit(key, 72)
      const late = await submit(key, 72)
      await age(gw, early, 40 * HOUR)
      await age(gw, late, 48 * HOUR + 5)
      await waitFor('the late one to fail', async () => (await read(key, late)).status === 'failed')
      expect((await read(key, early)).status).toBe('in_progress')
    })
  })
}

/**
 * With batch lanes in the catalog the lane engine looks at every runnable batch's first line to
 * choose its lane; looking must not start it. A batch kept waiting behind an earlier one's lines
 * (every slot busy for seconds) is still unstarted, and fails at half its window.
 */
for (const store of STORES) {
  describe(`${store}, with batch lanes`, () => {
    let sim: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 3_000 })
      const catalog = laneCatalog(sim.url, sim.url)
      // Three lines in flight at most (one slot each, and half again): the first batch's, whose
      // lines go to both providers (a batch takes no more than its providers' slots and a round
      // waiting, so one provider's alone would leave the third place to the next batch).
      catalog.providers.sim.max_concurrency = 1
      catalog.providers.claude.max_concurrency = 1
      gw = await startTestGateway({
        store,
        catalog,
        env: { MULTIGRID_POLL_MS: '20', MULTIGRID_CREDIT_WAIT_POLL_MS: '100' },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await sim.stop()
    })

    test('a batch that waited while the lanes looked at it is unstarted: capacity_unavailable', async () => {
      const { key } = await gw.newAccount('5')
      const submit = async (hours: number, count: number) => {
        const lines = Array.from({ length: count }, (_, i) =>
          chatLine(`l-${i}`, 'q', {}, i % 2 === 0 ? 'lane/none' : 'lane/claude'),
        )
        const response = await gw.request(`/v1/batches?completion_window_hours=${hours}`, key, {
          method: 'POST',
          body: jsonl(lines),
        })
        expect(response.status).toBe(201)
        return ((await response.json()) as { id: string }).id
      }
      const read = async (id: string) =>
        (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
          status: string
          started_at: number | null
          errors: { code: string }[] | null
          request_counts: { running: number }
        }
      const first = await submit(1, 6)
      await waitFor(
        'the first batch to fill the room',
        async () => (await read(first)).request_counts.running === 3,
      )
      const waiting = await submit(24, 1)
      // Many turns of the lane engine (every 100 ms here) while the slot stays busy.
      await Bun.sleep(1_000)
      expect((await read(first)).status).toBe('in_progress')
      expect((await read(waiting)).started_at).toBeNull()
      await age(gw, waiting, 12 * HOUR + 5)
      const failed = await waitFor('the waiting batch to fail', async () => {
        const batch = await read(waiting)
        return batch.status === 'failed' ? batch : null
      })
      expect(JSON.stringify(failed.errors)).toContain('capacity_unavailable')
      await gw.request(`/v1/batches/${first}`, key, { method: 'DELETE' })
    }, 30_000)
  })
}

/**
 * A batch counts as started once a line of it is in flight, has ended, or was tried upstream (an
 * attempt used). A claim alone does not start it: a batch whose only provider is unreachable has
 * its lines claimed and handed back unsent, and still fails at half its window.
 */
for (const store of STORES) {
  describe(`${store}, with the dispatcher running`, () => {
    let sim: Simulator
    let erring: Simulator
    let down: TestGateway
    let slow: TestGateway
    let failing: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 4_000 })
      erring = await startSimulator({ errorRate: 1 })
      const env = { MULTIGRID_POLL_MS: '20', MULTIGRID_CREDIT_WAIT_POLL_MS: '100' }
      // The test catalog's default upstream is 127.0.0.1:9, where nothing listens.
      down = await startTestGateway({ store, env })
      slow = await startTestGateway({ store, env, upstreams: { openai: `${sim.url}/v1` } })
      failing = await startTestGateway({
        store,
        env: { ...env, MULTIGRID_MAX_ATTEMPTS: '100' },
        upstreams: { openai: `${erring.url}/v1` },
      })
    })
    afterAll(async () => {
      await down.stop()
      await slow.stop()
      await failing.stop()
      await sim.stop()
      await erring.stop()
    })

    const submit = (gw: TestGateway, key: string) => submitPair(gw, key, 24)
    const read = readBatch

    test('its only provider unreachable: claimed and handed back, still failed capacity_unavailable', async () => {
      const { key, accountId } = await down.newAccount('5')
      const id = await submit(down, key)
      await waitFor('its lines to be tried and held back', async () => {
        const batch = await read(down, key, id)
        return batch.started_at !== null && batch.waiting?.code === 'provider_unavailable'
      })
      await age(down, id, 12 * HOUR + 5)
      const failed = await waitFor('the batch to fail', async () => {
        const batch = await read(down, key, id)
        return batch.status === 'failed' ? batch : null
      })
      expect(failed.errors?.map((error) => error.code)).toEqual(['capacity_unavailable'])
      expect(failed.request_counts.failed).toBe(2)
      expect(failed.request_counts.running).toBe(0)
      expect(failed.cost_usd).toBe('0.000000')
      // Its claims and hand-backs were folded into its row with its end.
      expect(await shardsOf(down, id)).toBe(0)
      const after = (await (await down.admin(`/accounts/${accountId}`)).json()) as {
        balance_usd: string
        held_usd: string
      }
      expect(Number(after.held_usd)).toBe(0)
      expect(Number(after.balance_usd)).toBe(5)
    }, 30_000)

    test('a line in flight has started it: past half its window it runs on', async () => {
      const { key } = await slow.newAccount('5')
      const id = await submit(slow, key)
      await waitFor(
        'its lines to be upstream',
        async () => (await read(slow, key, id)).request_counts.running === 2,
      )
      await age(slow, id, 12 * HOUR + 5)
      // Several turns of the check (every 100 ms here) while the lines are upstream.
      await Bun.sleep(1_000)
      expect((await read(slow, key, id)).status).toBe('in_progress')
      const done = await waitFor('the batch to complete', async () => {
        const batch = await read(slow, key, id)
        return batch.status === 'completed' ? batch : null
      })
      expect(done.request_counts.succeeded).toBe(2)
    }, 30_000)

    test('lines tried upstream and waiting to be tried again have started it: it runs on', async () => {
      const { key } = await failing.newAccount('5')
      const id = await submit(failing, key)
      // Every call answered 500: each line is tried, then waits its backoff, pending.
      await waitFor('the lines to be tried', async () => erring.stats().requests >= 2)
      await age(failing, id, 12 * HOUR + 5)
      // Several turns of the check (every 100 ms here) while the lines wait for their retries.
      await Bun.sleep(1_000)
      const batch = await read(failing, key, id)
      expect(batch.status).toBe('in_progress')
      expect(batch.errors).toBeNull()
      await failing.request(`/v1/batches/${id}`, key, { method: 'DELETE' })
    }, 30_000)
  })
}
