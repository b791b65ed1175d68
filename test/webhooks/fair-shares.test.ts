/**
 * Webhook deliveries shared fairly (docs/webhooks-and-streams.md) over real HTTP, with the default timeouts: one
 * account's 20 webhooks pointed at a port that accepts and never answers, with 10 ended batches,
 * hold at most 2 connections each, and another account's delivery still arrives within 3 s. A
 * webhook whose every attempt failed for the window is disabled, shown so, sent nothing new, and
 * enabled again by POST /v1/webhooks/{id}/enable.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { createServer, type Server, type Socket } from 'node:net'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts'

type Webhook = {
  id: string
  url: string
  status: 'enabled' | 'disabled'
  disabled_at: number | null
}

/** A port that accepts connections, reads the request and never answers. */
function startStalledPort() {
  const sockets = new Set<Socket>()
  /** Open connections per request path, and the most seen at once. */
  const open = new Map<string, number>()
  const peak = new Map<string, number>()
  let accepted = 0
  const server: Server = createServer((socket) => {
    accepted++
    sockets.add(socket)
    let path: string | null = null
    socket.on('data', (chunk) => {
      if (path !== null) return
      path = /^POST (\S+)/.exec(chunk.toString('latin1'))?.[1] ?? '?'
      const now = (open.get(path) ?? 0) + 1
      open.set(path, now)
      peak.set(path, Math.max(peak.get(path) ?? 0, now))
    })
    socket.on('close', () => {
      sockets.delete(socket)
      if (path !== null) open.set(path, open.get(path)! - 1)
    })
    socket.on('error', () => {})
  })
  return {
    async listen() {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      return `http://127.0.0.1:${(server.address() as { port: number }).port}`
    },
    peak,
    accepted: () => accepted,
    async stop() {
      for (const socket of sockets) socket.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

for (const storeKind of STORES) {
  describe(`fair webhook shares (${storeKind})`, () => {
    let gw: TestGateway
    let receiver: WebhookReceiver
    const stalled = startStalledPort()
    let stalledUrl = ''
    let answer = 503

    beforeAll(async () => {
      stalledUrl = await stalled.listen()
      receiver = startWebhookReceiver((path) => (path === '/flaky' ? answer : 200))
      // The default timeouts (15 s an attempt, 500 ms poll); nothing is dispatched: the batches
      // are cancelled, which ends them at once.
      gw = await startTestGateway({
        store: storeKind,
        env: {
          MULTIGRID_DISPATCH: '0',
          MULTIGRID_WEBHOOK_ALLOW_PRIVATE: 'true',
          MULTIGRID_WEBHOOK_RETRY_BASE_MS: '200',
          MULTIGRID_WEBHOOK_DISABLE_AFTER_MS: '1500',
        },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await receiver.stop()
      await stalled.stop()
    })

    const createWebhook = async (key: string, url: string) => {
      const response = await gw.request('/v1/webhooks', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ url, events: ['batch.cancelled'] }),
      })
      expect(response.status).toBe(201)
      return ((await response.json()) as Webhook).id
    }
    /** A batch submitted and cancelled at once: a `batch.cancelled` event. */
    const endBatch = async (key: string) => {
      const submitted = await gw.request('/v1/batches', key, {
        method: 'POST',
        body: jsonl([chatLine('a')]),
      })
      expect(submitted.status).toBe(201)
      const { id } = (await submitted.json()) as { id: string }
      const cancelled = await gw.request(`/v1/batches/${id}`, key, { method: 'DELETE' })
      expect(cancelled.status).toBe(200)
      return id
    }
    const listWebhooks = async (key: string) =>
      ((await (await gw.request('/v1/webhooks', key)).json()) as { data: Webhook[] }).data

    test("another account's delivery arrives within 3 s while 20 stalled webhooks hold theirs, 2 connections each", async () => {
      const hostile = await gw.newAccount('100', { rate_limit_per_minute: 10_000 })
      for (let i = 0; i < 20; i++) await createWebhook(hostile.key, `${stalledUrl}/hook-${i}`)
      for (let i = 0; i < 10; i++) await endBatch(hostile.key)
      // The stalled port fills: every webhook has its 2 attempts open (200 deliveries are due).
      await waitFor(
        'every stalled webhook to hold 2 attempts',
        async () => stalled.accepted() >= 40,
      )
      const victim = await gw.newAccount('100')
      await createWebhook(victim.key, `${receiver.url}/victim`)
      const startedAt = Date.now()
      const batchId = await endBatch(victim.key)
      const [delivery] = await waitFor('the victim’s delivery', async () => {
        const got = receiver.at('/victim')
        return got.length > 0 ? got : null
      })
      const lateMs = delivery!.at - startedAt
      console.log(`fair shares (${storeKind}): delivered ${lateMs} ms after its batch ended`)
      expect(JSON.parse(delivery!.body).data.id).toBe(batchId)
      expect(lateMs).toBeLessThan(3_000)
      // No stalled webhook ever held more than 2 connections at once.
      expect(stalled.peak.size).toBe(20)
      for (const [path, most] of stalled.peak) expect([path, most]).toEqual([path, 2])
    })

    test('a webhook failing every attempt for the window is disabled, sent nothing new, and enabled again', async () => {
      const owner = await gw.newAccount('100', { rate_limit_per_minute: 10_000 })
      const id = await createWebhook(owner.key, `${receiver.url}/flaky`)
      expect(await listWebhooks(owner.key)).toEqual([
        expect.objectContaining({ id, status: 'enabled', disabled_at: null }),
      ])
      await endBatch(owner.key)
      // 503 on every attempt (retries 200 ms, 400 ms, …): disabled once 1.5 s of them failed.
      const [disabled] = await waitFor('the webhook to be disabled', async () => {
        const hooks = await listWebhooks(owner.key)
        return hooks[0]!.status === 'disabled' ? hooks : null
      })
      expect(disabled!.disabled_at).toBeGreaterThan(Math.floor(Date.now() / 1000) - 60)
      const sent = receiver.at('/flaky').length
      const log = async () =>
        (
          (await (await gw.request(`/v1/webhooks/${id}/deliveries`, owner.key)).json()) as {
            data: { status: string }[]
          }
        ).data
      expect(await log()).toHaveLength(1)
      // A new event gives it no delivery, and its pending one is not tried.
      await endBatch(owner.key)
      await Bun.sleep(1_500)
      expect(await log()).toHaveLength(1)
      expect(receiver.at('/flaky').length).toBe(sent)
      // Another account's id is a 404, as an unknown one.
      const other = await gw.newAccount('1')
      const foreign = await gw.request(`/v1/webhooks/${id}/enable`, other.key, { method: 'POST' })
      expect(foreign.status).toBe(404)
      expect(((await foreign.json()) as { error: { code: string } }).error.code).toBe('not_found')
      expect(
        (await gw.request('/v1/webhooks/whe_missing/enable', owner.key, { method: 'POST' })).status,
      ).toBe(404)
      // Enabled: the webhook object, and its pending delivery goes out again.
      answer = 200
      const enabled = await gw.request(`/v1/webhooks/${id}/enable`, owner.key, { method: 'POST' })
      expect(enabled.status).toBe(200)
      expect(await enabled.json()).toEqual({
        id,
        object: 'webhook',
        url: `${receiver.url}/flaky`,
        events: ['batch.cancelled'],
        created_at: expect.any(Number),
        status: 'enabled',
        disabled_at: null,
      })
      await waitFor('the pending delivery to go out', async () =>
        (await log())[0]!.status === 'delivered' ? true : null,
      )
    })
  })
}
