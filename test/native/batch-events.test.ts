/**
 * The progress stream (docs/events-and-webhooks.md) over real HTTP, against the simulator: `event: batch` with the
 * batch object on every change, at most one a second, statuses never going back, the ended
 * state last and then the end of the stream; `Last-Event-ID` resumes; keep-alive comments; the
 * same refusals as every batch read; nothing left behind when the client goes away.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { readAll, readSse, type SseEvent } from '../helpers/sse.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

type Batch = {
  id: string
  status: string
  request_counts: Record<string, number>
  cost_usd: string
  waiting: { code: string } | null
}

/** Where each status stands in a batch's life: a stream never shows a lower one after a higher. */
const STAGE: Record<string, number> = {
  validating: 0,
  in_progress: 1,
  finalizing: 2,
  cancelling: 2,
  completed: 3,
  failed: 3,
  cancelled: 3,
  expired: 3,
}
const done = (b: Batch) =>
  b.request_counts.succeeded +
  b.request_counts.failed +
  b.request_counts.cancelled +
  b.request_counts.expired

for (const store of STORES) {
  describe(`progress stream (${store})`, () => {
    let sim: Simulator
    let gw: TestGateway
    let key = ''

    beforeAll(async () => {
      // Two lines at a time, each 400 ms: an 8-line batch takes ~1.6 s and moves many times.
      sim = await startSimulator({ latencyMs: 400 })
      gw = await startTestGateway({
        store,
        catalog: testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 2 }),
        env: { MULTIGRID_POLL_MS: '50', MULTIGRID_EVENTS_KEEPALIVE_MS: '300' },
      })
      key = (await gw.newAccount('5')).key
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    const submit = async (count: number) => {
      const lines = Array.from({ length: count }, (_, i) => chatLine(`t-${i + 1}`, `line ${i}`))
      const response = await gw.request('/v1/batches', key, {
        method: 'POST',
        body: jsonl(lines),
      })
      expect(response.status).toBe(201)
      return ((await response.json()) as Batch).id
    }
    const events = (id: string, headers: Record<string, string> = {}, as = key) =>
      gw.request(`/v1/batches/${id}/events`, as, { headers })
    const batchOf = (event: SseEvent) => JSON.parse(event.data) as Batch

    test('a batch object on every change, a second apart at least, never going back, the ended state last, then the end', async () => {
      const id = await submit(8)
      const response = await events(id)
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toBe('text/event-stream')
      expect(response.headers.get('x-ratelimit-limit')).not.toBeNull()
      const sse = readSse(response)
      const received = await readAll(sse, 30_000)
      expect(sse.ended()).toBe(true)

      expect(received.length).toBeGreaterThanOrEqual(2)
      for (const event of received) {
        expect(event.event).toBe('batch')
        expect(event.id).toMatch(/^\d+$/)
      }
      const batches = received.map(batchOf)
      for (let i = 1; i < received.length; i++) {
        expect(Number(received[i]!.id)).toBeGreaterThan(Number(received[i - 1]!.id))
        // At most one a second (a little slack for the timers' own rounding).
        expect(received[i]!.at - received[i - 1]!.at).toBeGreaterThanOrEqual(950)
        expect(STAGE[batches[i]!.status]!).toBeGreaterThanOrEqual(STAGE[batches[i - 1]!.status]!)
        expect(done(batches[i]!)).toBeGreaterThanOrEqual(done(batches[i - 1]!))
        // Each event says something new.
        expect(JSON.stringify(batches[i])).not.toBe(JSON.stringify(batches[i - 1]))
      }
      const last = batches.at(-1)!
      expect(last.status).toBe('completed')
      expect(batches.slice(0, -1).every((b) => !FINAL_BATCH.includes(b.status))).toBe(true)
      // The event is the batch object exactly as GET /v1/batches/{id} renders it.
      const read = await (await gw.request(`/v1/batches/${id}`, key)).json()
      expect(last).toEqual(read)
      expect(last.request_counts.succeeded).toBe(8)
    })

    test('Last-Event-ID resumes: only newer states, the ended one last; at the ended state itself, 204', async () => {
      const id = await submit(6)
      const first = readSse(await events(id))
      const seen = (await first.next())!
      await first.cancel()
      const seenBatch = batchOf(seen)

      const resumed = await events(id, { 'last-event-id': seen.id! })
      expect(resumed.status).toBe(200)
      const rest = await readAll(readSse(resumed), 30_000)
      expect(rest.length).toBeGreaterThanOrEqual(1)
      for (const event of rest) expect(Number(event.id)).toBeGreaterThan(Number(seen.id))
      const firstAfter = batchOf(rest[0]!)
      expect(STAGE[firstAfter.status]!).toBeGreaterThanOrEqual(STAGE[seenBatch.status]!)
      expect(done(firstAfter)).toBeGreaterThanOrEqual(done(seenBatch))
      const last = rest.at(-1)!
      expect(batchOf(last).status).toBe('completed')

      // Resumed after the ended state: nothing more will come, which tells EventSource to stop.
      const after = await events(id, { 'last-event-id': last.id! })
      expect(after.status).toBe(204)
      // A resume from before the end gets the ended state, once, and the end.
      const late = await readAll(readSse(await events(id, { 'last-event-id': seen.id! })))
      expect(late.map((event) => batchOf(event).status)).toEqual(['completed'])
      expect(late[0]!.id).toBe(last.id)
      // An id that is not one of ours starts over: the current state.
      const foreign = await readAll(readSse(await events(id, { 'last-event-id': 'abc' })))
      expect(foreign.map((event) => event.id)).toEqual([last.id])
    })

    test('keep-alive comments while nothing changes; an ended batch gets its state and the end', async () => {
      const id = await submit(2)
      await gw.request(`/v1/batches/${id}`, key, { method: 'DELETE' })
      const final = await waitFor('the cancel to end the batch', async () => {
        const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
        return FINAL_BATCH.includes(batch.status) && batch
      })
      const ended = await readAll(readSse(await events(id)))
      expect(ended.map(batchOf)).toEqual([final])

      const running = await submit(1)
      const sse = readSse(await events(running))
      await sse.next()
      // The keep-alive interval is 300 ms here (SPEC's 15 s by default); the line takes 400 ms.
      await waitFor('a keep-alive comment', async () => {
        await sse.next(100).catch(() => null)
        return sse.comments.includes('keep-alive')
      })
      await sse.cancel()
    })

    test('why the batch waits is an event too: the wait on a 429, then its end', async () => {
      sim.configure({ rate429: 1, retryAfterSeconds: 2 })
      try {
        const id = await submit(2)
        const sse = readSse(await events(id))
        const seen: Batch[] = []
        for (;;) {
          const event = await sse.next(20_000)
          if (!event) break
          const batch = batchOf(event)
          seen.push(batch)
          if (batch.waiting?.code === 'provider_rate_limited') sim.configure({ rate429: 0 })
        }
        const codes = seen.map((batch) => batch.waiting?.code ?? null)
        expect(codes).toContain('provider_rate_limited')
        expect(seen.at(-1)).toMatchObject({ status: 'completed', waiting: null })
      } finally {
        sim.configure({ rate429: 0 })
      }
    })

    test("another account's batch is 404, a missing key 401, like every batch read", async () => {
      const id = await submit(1)
      const other = await gw.newAccount('1')
      const response = await events(id, {}, other.key)
      expect(response.status).toBe(404)
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('not_found')
      expect((await gw.request(`/v1/batches/${id}/events`, null)).status).toBe(401)
      expect((await events('batch_missing')).status).toBe(404)
    })

    test('a client that goes away leaves nothing behind', async () => {
      const { key: quietKey } = await gw.newAccount('1')
      const created = await gw.request('/v1/batches', quietKey, {
        method: 'POST',
        body: jsonl([chatLine('q')]),
      })
      const { id } = (await created.json()) as Batch
      const before = gw.batchChanges.watching()
      const controller = new AbortController()
      const response = await gw.request(`/v1/batches/${id}/events`, quietKey, {
        signal: controller.signal,
      })
      const sse = readSse(response)
      await sse.next()
      expect(gw.batchChanges.watching()).toBe(before + 1)
      controller.abort()
      await waitFor('the stream to let go', async () => gw.batchChanges.watching() === before)
    })
  })
}

describe('progress stream: change signals', () => {
  let gw: TestGateway

  beforeAll(async () => {
    // No dispatcher and a slow poll: only the cancel's signal can tell the stream in time.
    gw = await startTestGateway({
      env: { MULTIGRID_DISPATCH: '0', MULTIGRID_EVENTS_POLL_MS: '60000' },
    })
  })
  afterAll(async () => {
    await gw?.stop()
  })

  test('a cancel reaches the stream at once, not at the next poll', async () => {
    const { key } = await gw.newAccount('1')
    const created = await gw.request('/v1/batches', key, {
      method: 'POST',
      body: jsonl([chatLine('a'), chatLine('b')]),
    })
    const { id } = (await created.json()) as Batch
    const sse = readSse(await gw.request(`/v1/batches/${id}/events`, key))
    expect(JSON.parse((await sse.next())!.data).status).toBe('in_progress')
    const cancelledAt = Date.now()
    await gw.request(`/v1/batches/${id}`, key, { method: 'DELETE' })
    const next = (await sse.next(5_000))!
    expect(JSON.parse(next.data).status).toBe('cancelled')
    // One second after the first event at most (the gap), far from the 60 s poll.
    expect(next.at - cancelledAt).toBeLessThan(2_000)
    expect(await sse.next()).toBeNull()
  })
})
