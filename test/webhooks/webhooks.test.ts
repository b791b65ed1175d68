/**
 * Signed webhooks (docs/events-and-webhooks.md) over real HTTP: a real gateway, the upstream simulator, and a real
 * receiver on 127.0.0.1 whose deliveries are checked by the official `openai` package's
 * `webhooks.unwrap` and against OpenAI's published event schemas.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import OpenAI, { toFile } from 'openai'
import postgres from 'postgres'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import {
  chatLine,
  freshSchemaUrl,
  jsonl,
  startTestGateway,
  STORES,
  TEST_DATABASE_URL,
  type TestGateway,
} from '../helpers/gateway.ts'
import { contractProblems } from '../helpers/openai-contract.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts'

type Webhook = { id: string; object: string; url: string; events: string[]; secret?: string }
type Delivery = {
  event_id: string
  event_type: string
  batch_id: string
  status: string
  attempts: number
  last_status_code: number | null
  last_error: string | null
  created_at: number
  last_attempt_at: number | null
  next_attempt_at: number | null
  delivered_at: number | null
}

const SCHEMAS: Record<string, string> = {
  'batch.completed': 'WebhookBatchCompleted',
  'batch.failed': 'WebhookBatchFailed',
  'batch.cancelled': 'WebhookBatchCancelled',
  'batch.expired': 'WebhookBatchExpired',
}

for (const storeKind of STORES) {
  describe(`webhooks (${storeKind})`, () => {
    let sim: Simulator
    let slow: Simulator
    let gw: TestGateway
    let receiver: WebhookReceiver

    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 5 })
      // The Anthropic-kind model's upstream, slow enough to cancel its batch while lines run.
      slow = await startSimulator({ latencyMs: 1_500, requireApiKey: 'sk-ant-test-secret' })
      receiver = startWebhookReceiver((path, index) => {
        if (path === '/flaky') return index < 2 ? 500 : 200
        if (path === '/down') return 503
        return 200
      })
      gw = await startTestGateway({
        store: storeKind,
        upstreams: { openai: `${sim.url}/v1`, anthropic: slow.url },
        env: {
          MULTIGRID_POLL_MS: '50',
          MULTIGRID_WEBHOOK_ALLOW_PRIVATE: 'true',
          MULTIGRID_WEBHOOK_RETRY_BASE_MS: '200',
        },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await receiver.stop()
      await sim.stop()
      await slow.stop()
    })

    const createWebhook = async (key: string, body: unknown) => {
      const response = await gw.request('/v1/webhooks', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      return { status: response.status, body: (await response.json()) as any }
    }
    const submit = async (key: string, lines: unknown[]) => {
      const response = await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      expect(response.status).toBe(201)
      return ((await response.json()) as { id: string }).id
    }
    const finished = (key: string, id: string) =>
      waitFor(`batch ${id} to end`, async () => {
        const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
          status: string
        }
        return FINAL_BATCH.includes(batch.status) ? batch.status : null
      })
    const deliveries = async (key: string, webhookId: string) => {
      const response = await gw.request(`/v1/webhooks/${webhookId}/deliveries`, key)
      expect(response.status).toBe(200)
      return ((await response.json()) as { data: Delivery[] }).data
    }
    /** The deliveries to `path` whose event is about `batchId`. */
    const receivedFor = (path: string, batchId: string) =>
      receiver.at(path).filter((r) => JSON.parse(r.body).data.id === batchId)

    test('create answers 201 with a whsec_ secret, shown once: the list and the log never carry it', async () => {
      const { key } = await gw.newAccount('1')
      const created = await createWebhook(key, { url: `${receiver.url}/first` })
      expect(created.status).toBe(201)
      expect(created.body).toEqual({
        id: expect.stringMatching(/^whe_/),
        object: 'webhook',
        url: `${receiver.url}/first`,
        events: ['batch.completed', 'batch.failed', 'batch.cancelled', 'batch.expired'],
        created_at: expect.any(Number),
        status: 'enabled',
        disabled_at: null,
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
      })
      // A Standard Webhooks secret: whsec_ and the base64 of 32 random bytes.
      expect(Buffer.from(created.body.secret.slice(6), 'base64')).toHaveLength(32)
      const subset = await createWebhook(key, {
        url: `${receiver.url}/first-2`,
        events: ['batch.failed', 'batch.completed', 'batch.failed'],
      })
      expect(subset.status).toBe(201)
      expect(subset.body.events).toEqual(['batch.completed', 'batch.failed'])
      expect(subset.body.secret).not.toBe(created.body.secret)

      const listed = await gw.request('/v1/webhooks', key)
      const text = await listed.text()
      expect(listed.status).toBe(200)
      expect(JSON.parse(text)).toEqual({
        object: 'list',
        data: [
          { ...subset.body, secret: undefined },
          { ...created.body, secret: undefined },
        ].map(({ secret: _, ...rest }) => rest),
      })
      expect(text).not.toContain(created.body.secret)
      expect(text).not.toContain(subset.body.secret)
      expect(text).not.toContain('secret')
      // Its batches' deliveries do not carry it either.
      const id = await submit(key, [chatLine('a')])
      await finished(key, id)
      await waitFor('the delivery', async () => receivedFor('/first', id).length > 0)
      const log = await (await gw.request(`/v1/webhooks/${created.body.id}/deliveries`, key)).text()
      expect(log).not.toContain(created.body.secret)
    })

    test('every terminal status, native and facade, is delivered signed: the openai SDK unwraps each, and each matches OpenAI’s event schema', async () => {
      const { key } = await gw.newAccount('5')
      const all = await createWebhook(key, { url: `${receiver.url}/all` })
      const onlyFailed = await createWebhook(key, {
        url: `${receiver.url}/only-failed`,
        events: ['batch.failed'],
      })
      const openai = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 })

      const completed = await submit(key, [chatLine('a'), chatLine('b')])
      const failed = await submit(key, [chatLine('x', 'hi', {}, 'sim/refused')])
      const slowBatch = await submit(key, [chatLine('c', 'hi', {}, 'sim/claude')])
      await waitFor('a line upstream', async () => {
        const batch = (await (await gw.request(`/v1/batches/${slowBatch}`, key)).json()) as any
        return batch.request_counts.running > 0
      })
      const cancel = await gw.request(`/v1/batches/${slowBatch}`, key, { method: 'DELETE' })
      expect(cancel.status).toBe(200)
      const file = await openai.files.create({
        file: await toFile(Buffer.from(jsonl([chatLine('f')])), 'in.jsonl'),
        purpose: 'batch',
      })
      const facade = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      // A file with a problem: the facade stores the batch as failed at once.
      const badFile = await openai.files.create({
        file: await toFile(
          Buffer.from(jsonl([chatLine('g', 'hi', {}, 'no/such-model')])),
          'bad.jsonl',
        ),
        purpose: 'batch',
      })
      const refused = await openai.batches.create({
        input_file_id: badFile.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      expect(refused.status).toBe('failed')

      const expected: Record<string, string> = {
        [completed]: 'batch.completed',
        [failed]: 'batch.failed',
        [slowBatch]: 'batch.cancelled',
        [facade.id]: 'batch.completed',
        [refused.id]: 'batch.failed',
      }
      for (const id of Object.keys(expected))
        expect(`${id} ${await finished(key, id)}`).toBe(
          `${id} ${expected[id]!.slice('batch.'.length)}`,
        )
      await waitFor('five deliveries', async () => receiver.at('/all').length >= 5, 15_000)
      await Bun.sleep(300)
      const got = receiver.at('/all')
      expect(got).toHaveLength(5)
      const seen: Record<string, string> = {}
      for (const delivery of got) {
        const event = (await openai.webhooks.unwrap(
          delivery.body,
          delivery.headers,
          all.body.secret,
        )) as any
        expect(event).toEqual({
          id: expect.stringMatching(/^evt_/),
          object: 'event',
          type: expected[event.data.id],
          created_at: expect.any(Number),
          data: { id: event.data.id },
        })
        expect(delivery.headers['webhook-id']).toBe(event.id)
        expect(delivery.headers['content-type']).toBe('application/json')
        expect(contractProblems(SCHEMAS[event.type]!, event)).toEqual([])
        seen[event.data.id] = event.type
        // Another webhook's secret does not verify it.
        await expect(
          openai.webhooks.unwrap(delivery.body, delivery.headers, onlyFailed.body.secret),
        ).rejects.toThrow(/signature/)
      }
      expect(seen).toEqual(expected)
      // The batch's finished_at is the event's time.
      const batch = (await (await gw.request(`/v1/batches/${completed}`, key)).json()) as any
      const completedEvent = JSON.parse(receivedFor('/all', completed)[0]!.body)
      expect(completedEvent.created_at).toBe(batch.finished_at)

      // The webhook that asked only for batch.failed heard of the two failed batches, nothing else.
      await waitFor('two failures', async () => receiver.at('/only-failed').length >= 2)
      await Bun.sleep(300)
      const failures = receiver.at('/only-failed').map((r) => JSON.parse(r.body))
      expect(failures.map((e) => e.data.id).sort()).toEqual([failed, refused.id].sort())
      // One event, one id: both webhooks got the failed batch's event under the same id.
      expect(failures.find((e) => e.data.id === failed).id).toBe(
        JSON.parse(receivedFor('/all', failed)[0]!.body).id,
      )
      // Recorded just after the receiver's answer.
      const log = await waitFor('five deliveries recorded', async () => {
        const entries = await deliveries(key, all.body.id)
        return entries.every((d) => d.status === 'delivered') ? entries : null
      })
      expect(log).toHaveLength(5)
      for (const entry of log) {
        expect(entry).toMatchObject({
          event_type: expected[entry.batch_id],
          status: 'delivered',
          attempts: 1,
          last_status_code: 200,
          last_error: null,
          next_attempt_at: null,
          delivered_at: expect.any(Number),
        })
      }
    })

    test('a receiver that fails its first two deliveries gets the third, with the same webhook-id; the log shows a failing one', async () => {
      const { key } = await gw.newAccount('1')
      const flaky = await createWebhook(key, { url: `${receiver.url}/flaky` })
      const down = await createWebhook(key, { url: `${receiver.url}/down` })
      const id = await submit(key, [chatLine('a')])
      await finished(key, id)
      await waitFor('the third attempt', async () => receiver.at('/flaky').length >= 3, 15_000)
      const attempts = receiver.at('/flaky')
      expect(attempts.map((a) => a.acked)).toEqual([false, false, true])
      const ids = new Set(attempts.map((a) => a.headers['webhook-id']))
      expect(ids.size).toBe(1)
      expect([...ids][0]).toBe(JSON.parse(attempts[0]!.body).id)
      // Each attempt is signed for its own timestamp, and each verifies.
      const openai = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1` })
      for (const attempt of attempts) {
        await openai.webhooks.unwrap(attempt.body, attempt.headers, flaky.body.secret)
      }
      // The backoff grows: 200 ms, then 400 ms (±10%, plus up to a 50 ms poll each).
      const gaps = [attempts[1]!.at - attempts[0]!.at, attempts[2]!.at - attempts[1]!.at]
      expect(gaps[0]).toBeGreaterThanOrEqual(170)
      expect(gaps[1]).toBeGreaterThanOrEqual(350)
      expect(gaps[1]).toBeGreaterThan(gaps[0]!)
      await waitFor('the log to say delivered', async () => {
        const [entry] = await deliveries(key, flaky.body.id)
        return entry?.status === 'delivered'
      })
      expect((await deliveries(key, flaky.body.id))[0]).toMatchObject({
        event_id: [...ids][0],
        event_type: 'batch.completed',
        batch_id: id,
        status: 'delivered',
        attempts: 3,
        last_status_code: 200,
        last_error: null,
      })
      // The receiver that stays down: pending, with its answer and the next attempt's time.
      await waitFor('two failed attempts', async () => receiver.at('/down').length >= 2, 15_000)
      const [failing] = await deliveries(key, down.body.id)
      expect(failing).toMatchObject({
        batch_id: id,
        status: 'pending',
        last_status_code: 503,
        last_error: 'HTTP 503: down for maintenance (503)',
        last_attempt_at: expect.any(Number),
        next_attempt_at: expect.any(Number),
        delivered_at: null,
      })
      expect(failing!.attempts).toBeGreaterThanOrEqual(2)
      // Deleting the webhook stops its deliveries and its log.
      const deleted = await gw.request(`/v1/webhooks/${down.body.id}`, key, { method: 'DELETE' })
      expect(await deleted.json()).toEqual({
        id: down.body.id,
        object: 'webhook.deleted',
        deleted: true,
      })
      const sent = receiver.at('/down').length
      await Bun.sleep(2_000)
      expect(receiver.at('/down').length).toBeLessThanOrEqual(sent + 1)
      expect((await gw.request(`/v1/webhooks/${down.body.id}/deliveries`, key)).status).toBe(404)
    })

    test('a redirect is not followed: the log says so, and where it pointed', async () => {
      const { key } = await gw.newAccount('1')
      const paths: string[] = []
      const moved = Bun.serve({
        port: 0,
        hostname: '127.0.0.1',
        fetch: (request) => {
          paths.push(new URL(request.url).pathname)
          return new Response(null, { status: 302, headers: { location: '/moved-here' } })
        },
      })
      try {
        const webhook = await createWebhook(key, { url: `http://127.0.0.1:${moved.port}/old` })
        await finished(key, await submit(key, [chatLine('a')]))
        const entry = await waitFor('a refused attempt', async () => {
          const [first] = await deliveries(key, webhook.body.id)
          return first?.last_status_code ? first : null
        })
        expect(entry).toMatchObject({
          status: 'pending',
          last_status_code: 302,
          last_error: `HTTP 302: redirects are not followed; to deliver there, make a webhook with http://127.0.0.1:${moved.port}/moved-here`,
        })
        expect(paths.length).toBeGreaterThan(0)
        expect(paths.filter((path) => path !== '/old')).toEqual([])
      } finally {
        moved.stop(true)
      }
    })

    test('another account’s webhook is a 404, and hears nothing of this account’s batches', async () => {
      const owner = await gw.newAccount('1')
      const other = await gw.newAccount('1')
      const mine = await createWebhook(owner.key, { url: `${receiver.url}/mine` })
      const theirs = await createWebhook(other.key, { url: `${receiver.url}/theirs` })
      const missing = {
        error: {
          message: `webhook ${mine.body.id} not found`,
          type: 'not_found_error',
          param: null,
          code: 'not_found',
        },
      }
      const log = await gw.request(`/v1/webhooks/${mine.body.id}/deliveries`, other.key)
      expect(log.status).toBe(404)
      expect(await log.json()).toEqual(missing)
      const removal = await gw.request(`/v1/webhooks/${mine.body.id}`, other.key, {
        method: 'DELETE',
      })
      expect(removal.status).toBe(404)
      expect(await removal.json()).toEqual(missing)
      const listed = (await (await gw.request('/v1/webhooks', other.key)).json()) as any
      expect(listed.data.map((w: Webhook) => w.id)).toEqual([theirs.body.id])

      const id = await submit(owner.key, [chatLine('a')])
      await finished(owner.key, id)
      await waitFor('the owner’s delivery', async () => receiver.at('/mine').length > 0)
      await Bun.sleep(300)
      expect(receiver.at('/theirs')).toEqual([])
      // Still there for its owner.
      expect((await gw.request(`/v1/webhooks/${mine.body.id}/deliveries`, owner.key)).status).toBe(
        200,
      )
    })

    test('bad creates are 400s that say what to send; a key without the batches scope is 403', async () => {
      const { key } = await gw.newAccount('1')
      const cases: [unknown, RegExp, string | null][] = [
        [{}, /url/, 'url'],
        [{ url: 42 }, /url/, 'url'],
        [{ url: 'not a url' }, /absolute https:\/\/ URL/, 'url'],
        [{ url: 'ftp://127.0.0.1/x' }, /https:\/\//, 'url'],
        [{ url: `${receiver.url}/x`, events: [] }, /events/, 'events'],
        [{ url: `${receiver.url}/x`, events: ['batch.done'] }, /events/, 'events.0'],
        [{ url: `${receiver.url}/x`, extra: true }, /extra/, null],
        // With the opt-in, http:// is still for loopback and private addresses only.
        [{ url: 'http://8.8.8.8/hook' }, /public address 8\.8\.8\.8.*use https:\/\//, 'url'],
      ]
      for (const [body, message, param] of cases) {
        const answer = await createWebhook(key, body)
        expect(`${JSON.stringify(body)} ${answer.status}`).toBe(`${JSON.stringify(body)} 400`)
        expect(answer.body.error.type).toBe('invalid_request_error')
        expect(answer.body.error.message).toMatch(message)
        if (param) expect(answer.body.error.param).toBe(param)
      }
      const notJson = await gw.request('/v1/webhooks', key, { method: 'POST', body: '{' })
      expect(notJson.status).toBe(400)
      const huge = await gw.request('/v1/webhooks', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ url: `${receiver.url}/${'x'.repeat(20_000)}` }),
      })
      expect(huge.status).toBe(413)
      const reader = await gw.newAccount('1', { scopes: ['read'] })
      const forbidden = await createWebhook(reader.key, { url: `${receiver.url}/x` })
      expect(forbidden.status).toBe(403)
      expect(forbidden.body.error.code).toBe('insufficient_permissions')
      expect((await gw.request('/v1/webhooks', null)).status).toBe(401)
    })
  })
}

describe('webhook URLs without MULTIGRID_WEBHOOK_ALLOW_PRIVATE', () => {
  let gw: TestGateway
  beforeAll(async () => {
    gw = await startTestGateway({ env: { MULTIGRID_DISPATCH: '0' } })
  })
  afterAll(() => gw.stop())

  test('loopback, private, link-local and names that resolve to them are refused with why; http:// too', async () => {
    const { key } = await gw.newAccount('1')
    const cases: [string, RegExp][] = [
      ['https://127.0.0.1/hook', /127\.0\.0\.1, a loopback address/],
      ['https://10.1.2.3/hook', /10\.1\.2\.3, a private address/],
      ['https://192.168.0.10:8443/hook', /a private address/],
      ['https://169.254.169.254/latest/meta-data', /a link-local address/],
      ['https://[::1]/hook', /::1, a loopback address/],
      ['https://[::ffff:10.0.0.1]/hook', /a private address/],
      ['https://[fd00::1]/hook', /a private address/],
      ['https://0.0.0.0/hook', /0\.0\.0\.0, an unspecified address/],
      ['https://localhost/hook', /localhost resolves to (127\.0\.0\.1|::1), a loopback address/],
      ['http://127.0.0.1:9/hook', /must start with https:\/\//],
      ['http://example.com/hook', /must start with https:\/\//],
    ]
    for (const [url, message] of cases) {
      const response = await gw.request('/v1/webhooks', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ url }),
      })
      const body = (await response.json()) as any
      expect(`${url} ${response.status}`).toBe(`${url} 400`)
      expect(body.error).toMatchObject({ type: 'invalid_request_error', param: 'url' })
      expect(body.error.message).toMatch(message)
      if (url.startsWith('http:')) continue
      // The opt-in is offered only for the kinds it opens; the others are never reachable.
      if (/a (loopback|private) address/.test(body.error.message))
        expect(body.error.message).toEndWith(
          "webhooks may not reach the gateway's own network (an operator can allow loopback and private addresses with MULTIGRID_WEBHOOK_ALLOW_PRIVATE=true)",
        )
      else
        expect(body.error.message).toEndWith(
          'address: webhooks may never reach one, not even with MULTIGRID_WEBHOOK_ALLOW_PRIVATE=true',
        )
    }
    const listed = (await (await gw.request('/v1/webhooks', key)).json()) as any
    expect(listed).toEqual({ object: 'list', data: [] })
  })
})

for (const storeKind of STORES) {
  describe(`webhook deliveries across a restart (${storeKind})`, () => {
    test('a stop ends the attempt under way and hands the delivery back: the next start sends it, the same webhook-id, the stopped attempt not counted', async () => {
      const sim = await startSimulator({ latencyMs: 1 })
      let hold = true
      const receiver = startWebhookReceiver(() => (hold ? 'hold' : 200))
      const dataDir = mkdtempSync(join(tmpdir(), 'mg-hooks-'))
      const databaseUrl =
        storeKind === 'postgres'
          ? freshSchemaUrl(TEST_DATABASE_URL!).url.replace('search_path=t_', 'search_path=wh_')
          : null
      const env: Record<string, string> = {
        MULTIGRID_DATA_DIR: dataDir,
        MULTIGRID_POLL_MS: '50',
        MULTIGRID_WEBHOOK_ALLOW_PRIVATE: 'true',
        ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
      }
      try {
        const first = await startTestGateway({ upstreams: { openai: `${sim.url}/v1` }, env })
        const { key } = await first.newAccount('1')
        const created = await first.request('/v1/webhooks', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ url: `${receiver.url}/hook` }),
        })
        const webhook = (await created.json()) as { id: string; secret: string }
        await first.request('/v1/batches', key, { method: 'POST', body: jsonl([chatLine('a')]) })
        await waitFor('the held attempt', async () => receiver.received.length === 1)
        await first.stop()
        hold = false
        const second = await startTestGateway({ upstreams: { openai: `${sim.url}/v1` }, env })
        try {
          await waitFor('the delivery', async () => receiver.received.some((r) => r.acked))
          const [held, sent] = receiver.received
          expect(sent!.headers['webhook-id']).toBe(held!.headers['webhook-id'])
          // The receiver's 2xx is recorded once the gateway has read it: a moment after the ack.
          const log = await waitFor('the delivery recorded', async () => {
            const answer = await second.request(`/v1/webhooks/${webhook.id}/deliveries`, key)
            const body = (await answer.json()) as { data: Delivery[] }
            return body.data.every((entry) => entry.status !== 'pending') && body
          })
          expect(log.data).toHaveLength(1)
          expect(log.data[0]).toMatchObject({ status: 'delivered', attempts: 1 })
          expect(receiver.received).toHaveLength(2)
        } finally {
          await second.stop()
        }
      } finally {
        await receiver.stop()
        await sim.stop()
        if (databaseUrl) await dropSchemaOf(databaseUrl)
      }
    })
  })

  describe(`webhook addresses checked again at delivery (${storeKind})`, () => {
    test('a webhook made with the opt-in is not sent to the loopback address its name resolves to once the gateway runs without it; no log line has the secret or the URL', async () => {
      const sim = await startSimulator({ latencyMs: 1 })
      const receiver = startWebhookReceiver()
      const dataDir = mkdtempSync(join(tmpdir(), 'mg-hooks-'))
      // One store for both runs: a schema this test drops itself (the helper drops t_ schemas at stop).
      const databaseUrl =
        storeKind === 'postgres'
          ? freshSchemaUrl(TEST_DATABASE_URL!).url.replace('search_path=t_', 'search_path=wh_')
          : null
      const env = (allowPrivate: boolean): Record<string, string> => ({
        MULTIGRID_DATA_DIR: dataDir,
        MULTIGRID_POLL_MS: '50',
        MULTIGRID_WEBHOOK_ALLOW_PRIVATE: String(allowPrivate),
        LOG_LEVEL: 'debug',
        ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
      })
      const logLines: string[] = []
      try {
        const before = await startTestGateway({
          upstreams: { openai: `${sim.url}/v1` },
          env: env(true),
          logLines,
        })
        const { key } = await before.newAccount('1')
        const created = await before.request('/v1/webhooks', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            url: `${receiver.url.replace('http://127.0.0.1', 'https://localhost')}/private?token=abc`,
          }),
        })
        expect(created.status).toBe(201)
        const webhook = (await created.json()) as { id: string; secret: string }
        await before.stop()

        const after = await startTestGateway({
          upstreams: { openai: `${sim.url}/v1` },
          env: env(false),
          logLines,
        })
        try {
          const submitted = await after.request('/v1/batches', key, {
            method: 'POST',
            body: jsonl([chatLine('a')]),
          })
          const { id } = (await submitted.json()) as { id: string }
          const [entry] = await waitFor('an attempt refused', async () => {
            const log = (await (
              await after.request(`/v1/webhooks/${webhook.id}/deliveries`, key)
            ).json()) as { data: Delivery[] }
            // attempts counts from the claim; last_error once the attempt is recorded.
            return log.data[0]?.last_error ? log.data : null
          })
          expect(entry).toMatchObject({
            batch_id: id,
            status: 'pending',
            last_status_code: null,
            last_error: expect.stringMatching(
              /^not sent: localhost resolves to (127\.0\.0\.1|::1), a loopback address: webhooks may not reach the gateway's own network/,
            ),
          })
          expect(receiver.received).toEqual([])
        } finally {
          await after.stop()
        }
        const all = logLines.join('\n')
        expect(all).toContain('webhook.retry')
        expect(all).not.toContain(webhook.secret)
        expect(all).not.toContain(webhook.secret.slice('whsec_'.length))
        expect(all).not.toContain('token=abc')
      } finally {
        await receiver.stop()
        await sim.stop()
        if (databaseUrl) await dropSchemaOf(databaseUrl)
      }
    })
  })
}

/** Drops the schema of a URL these tests made (not a t_ one, which the helper drops at each stop). */
async function dropSchemaOf(databaseUrl: string) {
  const sql = postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {} })
  await sql`DROP SCHEMA IF EXISTS ${sql(new URL(databaseUrl).searchParams.get('search_path')!)} CASCADE`
  await sql.end()
}
