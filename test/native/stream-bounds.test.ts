/**
 * Progress streams bounded and ended with their key (docs/webhooks-and-streams.md), over real HTTP: at most
 * MULTIGRID_MAX_STREAMS_PER_KEY (default 20) open at once per key, one more is 429
 * limit_exceeded with error.limit; a stream ends within 2 s of its key's revocation, on the
 * instance that revoked it and on another sharing the store; a Last-Event-ID above the batch's
 * version starts over with the current state (it hid every event, and the reconnect got 204).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import {
  chatLine,
  freshSchemaUrl,
  jsonl,
  startTestGateway,
  STORES,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  type TestGateway,
} from '../helpers/gateway.ts'
import { readSse, type SseReader } from '../helpers/sse.ts'
import { waitFor } from '../helpers/wait.ts'

type Batch = { id: string; status: string }
type Refusal = { error: { code: string; type: string; message: string; limit?: unknown } }

/** Nothing is dispatched: a batch stays open (in_progress) for as long as a test needs. */
const ENV = { MULTIGRID_DISPATCH: '0', MULTIGRID_EVENTS_KEEPALIVE_MS: '300' }

async function submit(gw: TestGateway, key: string) {
  const response = await gw.request('/v1/batches', key, {
    method: 'POST',
    body: jsonl([chatLine('a')]),
  })
  expect(response.status).toBe(201)
  return ((await response.json()) as Batch).id
}

/** Opens a stream and reads its first event (the current state). */
async function openStream(gw: TestGateway, key: string, id: string) {
  const response = await gw.request(`/v1/batches/${id}/events`, key)
  expect(response.status).toBe(200)
  const sse = readSse(response)
  expect((await sse.next(10_000))!.event).toBe('batch')
  return sse
}

/** How long after `from` the stream ended (it must end, within `withinMs`). */
async function endsWithin(sse: SseReader, from: number, withinMs: number) {
  for (;;) {
    const event = await sse.next(withinMs)
    if (event === null) return Date.now() - from
  }
}

async function revoke(gw: TestGateway, keyId: string) {
  const response = await gw.admin(`/keys/${keyId}`, { method: 'DELETE' })
  expect(response.status).toBe(200)
}

for (const store of STORES) {
  describe(`stream bounds (${store})`, () => {
    let gw: TestGateway

    beforeAll(async () => {
      gw = await startTestGateway({ store, env: ENV })
    })
    afterAll(() => gw.stop())

    test('20 streams open per key; the 21st is 429 limit_exceeded with error.limit; a closed one frees its slot', async () => {
      const { key, accountId } = await gw.newAccount('10', { rate_limit_per_minute: 10_000 })
      const id = await submit(gw, key)
      const streams: SseReader[] = []
      for (let i = 0; i < 20; i++) streams.push(await openStream(gw, key, id))
      const refused = await gw.request(`/v1/batches/${id}/events`, key)
      expect(refused.status).toBe(429)
      const body = (await refused.json()) as Refusal
      expect(body.error).toMatchObject({
        code: 'limit_exceeded',
        limit: { open_streams: 20, used: 20 },
      })
      expect(body.error.message).toContain('close one')
      // The limit is the key's: another key of the same account opens its own.
      const made = await gw.admin(`/accounts/${accountId}/keys`, { body: {} })
      const other = ((await made.json()) as { key: string }).key
      const theirs = await openStream(gw, other, id)
      // A client that goes away gives its slot back.
      await streams.pop()!.cancel()
      const again = await waitFor('a slot to free', async () => {
        const response = await gw.request(`/v1/batches/${id}/events`, key)
        if (response.status === 429) {
          await response.body?.cancel()
          return null
        }
        return response
      })
      expect(again.status).toBe(200)
      await again.body!.cancel()
      for (const sse of [...streams, theirs]) await sse.cancel()
    })

    test('a stream ends within 2 s of its key’s revocation', async () => {
      const { key, keyId } = await gw.newAccount('10')
      const id = await submit(gw, key)
      const streams = [await openStream(gw, key, id), await openStream(gw, key, id)]
      const revokedAt = Date.now()
      await revoke(gw, keyId)
      for (const sse of streams) {
        const endedMs = await endsWithin(sse, revokedAt, 5_000)
        console.log(`stream bounds (${store}): ended ${endedMs} ms after the revocation`)
        expect(endedMs).toBeLessThan(2_000)
        expect(sse.comments).toContain('the key was revoked')
      }
      expect((await gw.request(`/v1/batches/${id}/events`, key)).status).toBe(401)
    })

    test('a graceful stop ends a stream saying the instance stops, not that the key was revoked', async () => {
      const stopping = await startTestGateway({ store, env: ENV })
      const { key } = await stopping.newAccount('10')
      const sse = await openStream(stopping, key, await submit(stopping, key))
      const stoppedAt = Date.now()
      const stopped = stopping.stop()
      expect(await endsWithin(sse, stoppedAt, 10_000)).toBeLessThan(10_000)
      await stopped
      expect(sse.comments.join('\n')).toContain('this instance is stopping')
      expect(sse.comments).not.toContain('the key was revoked')
    })

    test('the dashboard’s streams count against the same key and end with their session; the key’s revocation ends the rest', async () => {
      const { key, keyId } = await gw.newAccount('10', { rate_limit_per_minute: 10_000 })
      const id = await submit(gw, key)
      const signIn = await fetch(`${gw.url}/dashboard/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ key }),
        redirect: 'manual',
      })
      const cookie = signIn.headers.get('set-cookie')!.split(';')[0]!
      const page = () => fetch(`${gw.url}/dashboard/batches/${id}/events`, { headers: { cookie } })
      const dashboard = readSse(await page())
      expect((await dashboard.next(10_000))!.event).toBe('batch')
      const api: SseReader[] = []
      for (let i = 0; i < 19; i++) api.push(await openStream(gw, key, id))
      const refused = await page()
      expect(refused.status).toBe(429)
      expect(await refused.text()).toContain('progress streams open')
      expect((await gw.request(`/v1/batches/${id}/events`, key)).status).toBe(429)
      // Signing out ends that session's stream, and only it: the key's API streams go on.
      const out = await fetch(`${gw.url}/dashboard/sign-out`, {
        method: 'POST',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: '',
        redirect: 'manual',
      })
      expect(out.status).toBe(303)
      expect(await endsWithin(dashboard, Date.now(), 5_000)).toBeLessThan(2_000)
      // Its last line says the session ended, not that the key (still good) was revoked.
      expect(dashboard.comments.join('\n')).toContain('the dashboard session ended')
      expect(dashboard.comments).not.toContain('the key was revoked')
      await Bun.sleep(500)
      for (const sse of api) expect(sse.ended()).toBe(false)
      const revokedAt = Date.now()
      await revoke(gw, keyId)
      for (const sse of api) expect(await endsWithin(sse, revokedAt, 5_000)).toBeLessThan(2_000)
    })

    test('a Last-Event-ID above the batch’s version starts over: the current state first', async () => {
      const { key } = await gw.newAccount('10')
      const id = await submit(gw, key)
      const first = await gw.request(`/v1/batches/${id}/events`, key)
      const reader = readSse(first)
      const current = await reader.next(10_000)
      await reader.cancel()
      const version = Number(current!.id)
      const ahead = await gw.request(`/v1/batches/${id}/events`, key, {
        headers: { 'last-event-id': String(version + 1_000) },
      })
      expect(ahead.status).toBe(200)
      const sse = readSse(ahead)
      const event = await sse.next(10_000)
      expect(event!.id).toBe(String(version))
      expect(JSON.parse(event!.data)).toMatchObject({ id, status: 'in_progress' })
      await sse.cancel()
      // An ended batch: its ended state, then the end — not a 204.
      expect((await gw.request(`/v1/batches/${id}`, key, { method: 'DELETE' })).status).toBe(200)
      const ended = await waitFor('the cancel to end the batch', async () => {
        const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
        return batch.status === 'cancelled' ? batch : null
      })
      expect(ended.status).toBe('cancelled')
      const late = await gw.request(`/v1/batches/${id}/events`, key, {
        headers: { 'last-event-id': '999999' },
      })
      expect(late.status).toBe(200)
      const lateSse = readSse(late)
      const last = await lateSse.next(10_000)
      expect(JSON.parse(last!.data)).toMatchObject({ id, status: 'cancelled' })
      expect(await lateSse.next(10_000)).toBeNull()
      // At the ended state's own id there is still nothing left: 204, as before.
      const seen = await gw.request(`/v1/batches/${id}/events`, key, {
        headers: { 'last-event-id': last!.id! },
      })
      expect(seen.status).toBe(204)
    })
  })
}

describe.skipIf(!TEST_DATABASE_URL)('stream bounds across two instances on one PostgreSQL', () => {
  let a: TestGateway
  let b: TestGateway
  beforeAll(async () => {
    const shared = freshSchemaUrl(TEST_DATABASE_URL!).url
    a = await startTestGateway({ env: { ...ENV, DATABASE_URL: shared } })
    b = await startTestGateway({ sharesSchema: true, env: { ...ENV, DATABASE_URL: shared } })
  })
  afterAll(async () => {
    await b?.stop()
    await a?.stop()
  })

  test('a key revoked on one instance ends its streams on the other within 2 s', async () => {
    const { key, keyId } = await a.newAccount('10')
    const id = await submit(a, key)
    const sse = await openStream(b, key, id)
    const revokedAt = Date.now()
    await revoke(a, keyId)
    const endedMs = await endsWithin(sse, revokedAt, 5_000)
    console.log(`stream bounds (two instances): ended ${endedMs} ms after the revocation`)
    expect(endedMs).toBeLessThan(2_000)
  })
})

describe.skipIf(!TEST_DATABASE_URL || !TEST_REDIS_URL)(
  'stream limit across two instances sharing PostgreSQL and Redis',
  () => {
    let a: TestGateway
    let b: TestGateway
    beforeAll(async () => {
      const env = {
        ...ENV,
        DATABASE_URL: freshSchemaUrl(TEST_DATABASE_URL!).url,
        REDIS_URL: TEST_REDIS_URL!,
        // A fleet of its own in the shared Redis.
        MULTIGRID_REDIS_PREFIX: `t${Math.random().toString(36).slice(2, 8)}:`,
      }
      a = await startTestGateway({ env })
      b = await startTestGateway({ sharesSchema: true, env })
    })
    afterAll(async () => {
      await b?.stop()
      await a?.stop()
    })

    test('the limit holds for the fleet: 12 open on one instance and 8 on the other, the 21st is 429 on either', async () => {
      const { key } = await a.newAccount('10', { rate_limit_per_minute: 10_000 })
      const id = await submit(a, key)
      const onA: SseReader[] = []
      const onB: SseReader[] = []
      for (let i = 0; i < 12; i++) onA.push(await openStream(a, key, id))
      for (let i = 0; i < 8; i++) onB.push(await openStream(b, key, id))
      for (const gw of [a, b]) {
        const refused = await gw.request(`/v1/batches/${id}/events`, key)
        expect(refused.status).toBe(429)
        expect(((await refused.json()) as Refusal).error).toMatchObject({
          code: 'limit_exceeded',
          limit: { open_streams: 20, used: 20 },
        })
      }
      // One closed on A frees a place for B.
      await onA.pop()!.cancel()
      const again = await waitFor('a place to free', async () => {
        const response = await b.request(`/v1/batches/${id}/events`, key)
        if (response.status === 429) {
          await response.body?.cancel()
          return null
        }
        return response
      })
      expect(again.status).toBe(200)
      await again.body!.cancel()
      for (const sse of [...onA, ...onB]) await sse.cancel()
    })
  },
)
