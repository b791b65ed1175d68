/**
 * Retry as a child batch (docs/events-and-webhooks.md) over real HTTP: `POST /v1/batches/{id}/retry` makes a batch
 * of exactly the parent's lines that did not succeed (same custom_ids, same bodies, in order),
 * admitted like a submit (today's catalog, the hold, the limits, the idempotency key); the child
 * names its parent and the parent lists it. 409 while the parent runs, 400 when nothing is left,
 * 404 for another account's batch.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

type Batch = {
  id: string
  status: string
  name: string | null
  line_count: number
  completion_window_hours: number
  request_counts: Record<string, number>
  parent_batch_id: string | null
  retried_by: string[]
}
type Refusal = { error: { code: string; param: string | null; message: string } }

for (const store of STORES) {
  describe(`retry as a child batch (${store})`, () => {
    let sim: Simulator
    let gw: TestGateway
    let idle: TestGateway
    let key = ''

    beforeAll(async () => {
      sim = await startSimulator()
      gw = await startTestGateway({
        store,
        upstreams: { openai: `${sim.url}/v1` },
        env: { MULTIGRID_POLL_MS: '50' },
      })
      // No dispatcher: its batches run until cancelled.
      idle = await startTestGateway({ store, env: { MULTIGRID_DISPATCH: '0' } })
      key = (await gw.newAccount('5')).key
    })
    afterAll(async () => {
      await gw?.stop()
      await idle?.stop()
      await sim?.stop()
    })

    const submit = async (on: TestGateway, as: string, lines: unknown[], query = '') => {
      const response = await on.request(`/v1/batches${query}`, as, {
        method: 'POST',
        body: jsonl(lines),
      })
      expect(response.status).toBe(201)
      return (await response.json()) as Batch
    }
    const retry = (on: TestGateway, as: string, id: string, init: RequestInit = {}) =>
      on.request(`/v1/batches/${id}/retry`, as, { method: 'POST', ...init })
    const read = async (on: TestGateway, as: string, id: string) =>
      (await (await on.request(`/v1/batches/${id}`, as)).json()) as Batch
    const ended = (on: TestGateway, as: string, id: string) =>
      waitFor(`${id} to end`, async () => {
        const batch = await read(on, as, id)
        return FINAL_BATCH.includes(batch.status) && batch
      })
    const text = async (on: TestGateway, as: string, path: string) =>
      (await on.request(path, as)).text()

    test("the child has exactly the parent's unsuccessful lines, and each names the other", async () => {
      const lines = [
        chatLine('ok-1', 'first'),
        chatLine('bad-2', 'refused', { temperature: 0.2 }, 'sim/refused'),
        chatLine('ok-3', 'third'),
        chatLine('bad-4', 'also refused', {}, 'sim/refused'),
        chatLine('ok-5', 'fifth'),
      ]
      const parent = await submit(gw, key, lines, '?name=nightly&completion_window_hours=6')
      expect(parent).toMatchObject({ parent_batch_id: null, retried_by: [] })
      const finished = await ended(gw, key, parent.id)
      expect(finished.request_counts).toMatchObject({ succeeded: 3, failed: 2 })

      const response = await retry(gw, key, parent.id)
      expect(response.status).toBe(201)
      const child = (await response.json()) as Batch
      expect(child).toMatchObject({
        object: 'batch',
        status: 'in_progress',
        name: 'nightly',
        line_count: 2,
        completion_window_hours: 6,
        parent_batch_id: parent.id,
        retried_by: [],
      })
      // Same custom_ids and bodies, in the parent's order: the input lines byte for byte.
      const unsuccessful = await text(
        gw,
        key,
        `/v1/batches/${parent.id}/results?filter=failed&format=input`,
      )
      expect(unsuccessful).toBe(jsonl([lines[1], lines[3]]))
      expect(await text(gw, key, `/v1/batches/${child.id}/results?format=input`)).toBe(unsuccessful)
      expect((await read(gw, key, parent.id)).retried_by).toEqual([child.id])
      const list = (await (await gw.request('/v1/batches', key)).json()) as { data: Batch[] }
      expect(list.data.find((b) => b.id === parent.id)!.retried_by).toEqual([child.id])
      expect(list.data.find((b) => b.id === child.id)!.parent_batch_id).toBe(parent.id)

      // The child runs like any batch; its own failures can be retried in turn.
      const childEnded = await ended(gw, key, child.id)
      expect(childEnded.request_counts).toMatchObject({ total: 2, failed: 2 })
      const grandchild = (await (await retry(gw, key, child.id)).json()) as Batch
      expect(grandchild.parent_batch_id).toBe(child.id)
      expect((await read(gw, key, child.id)).retried_by).toEqual([grandchild.id])
      expect((await read(gw, key, parent.id)).retried_by).toEqual([child.id])
    })

    test('409 while the parent is cancelling, saying it ends once its lines in flight finish', async () => {
      sim.configure({ latencyMs: 1_500 })
      try {
        const { key: own } = await gw.newAccount('5')
        const parent = await submit(gw, own, [chatLine('slow-a'), chatLine('slow-b')])
        await waitFor('a line upstream', async () => sim.stats().inFlight > 0)
        await gw.request(`/v1/batches/${parent.id}`, own, { method: 'DELETE' })
        const refused = await retry(gw, own, parent.id)
        expect(refused.status).toBe(409)
        const error = ((await refused.json()) as Refusal).error
        expect(error).toMatchObject({ code: 'batch_not_ended', status: 'cancelling' })
        expect(error.message).toEndWith('which it does once its lines in flight finish')
        expect(error.message).not.toContain('cancel it first')
      } finally {
        sim.configure({ latencyMs: 0 })
      }
    })

    test('409 while the parent runs; once cancelled, its cancelled lines are retried', async () => {
      const { key: own } = await idle.newAccount('5')
      const parent = await submit(idle, own, [chatLine('a'), chatLine('b'), chatLine('c')])
      const running = await retry(idle, own, parent.id)
      expect(running.status).toBe(409)
      const runningError = ((await running.json()) as Refusal).error
      expect(runningError).toMatchObject({ code: 'batch_not_ended', status: 'in_progress' })
      expect(runningError.message).toEndWith('or cancel it first')
      expect((await read(idle, own, parent.id)).retried_by).toEqual([])

      await idle.request(`/v1/batches/${parent.id}`, own, { method: 'DELETE' })
      expect((await ended(idle, own, parent.id)).request_counts.cancelled).toBe(3)
      const response = await retry(idle, own, parent.id, {
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ completion_window_hours: 2 }),
      })
      expect(response.status).toBe(201)
      const child = (await response.json()) as Batch
      expect(child).toMatchObject({ line_count: 3, completion_window_hours: 2 })
      expect(await text(idle, own, `/v1/batches/${child.id}/results?format=input`)).toBe(
        await text(idle, own, `/v1/batches/${parent.id}/results?format=input`),
      )
      // The child is running: it cannot be retried yet, but the parent can be retried again.
      expect((await retry(idle, own, child.id)).status).toBe(409)
      const second = (await (await retry(idle, own, parent.id)).json()) as Batch
      expect((await read(idle, own, parent.id)).retried_by).toEqual([child.id, second.id])
    })

    test('400 when every line succeeded, 410 once retention deleted the lines; 404 for another account’s batch or a missing one', async () => {
      const parent = await submit(gw, key, [chatLine('fine')])
      await ended(gw, key, parent.id)
      const nothing = await retry(gw, key, parent.id)
      expect(nothing.status).toBe(400)
      expect(((await nothing.json()) as Refusal).error.code).toBe('nothing_to_retry')

      const other = await gw.newAccount('5')
      const foreign = await retry(gw, other.key, parent.id)
      expect(foreign.status).toBe(404)
      expect(((await foreign.json()) as Refusal).error.code).toBe('not_found')
      expect((await retry(gw, key, 'batch_missing')).status).toBe(404)

      // Once retention has deleted a batch's lines, there is nothing left to retry from: 410.
      const purged = await submit(gw, key, [chatLine('gone', 'x', {}, 'sim/refused')])
      await ended(gw, key, purged.id)
      const now = Math.floor(Date.now() / 1000)
      expect(await gw.store.purgeResults(now + 1, 100, now)).toContain(purged.id)
      const expired = await retry(gw, key, purged.id)
      expect(expired.status).toBe(410)
      expect(((await expired.json()) as Refusal).error.code).toBe('results_expired')
      // Reading is not enough: retrying submits.
      const { key: reader } = await gw.newAccount('1', { scopes: ['read'] })
      expect((await retry(gw, reader, parent.id)).status).toBe(403)
    })

    test('admitted like any submit: the hold, the idempotency key, the options checked', async () => {
      const { key: own, accountId } = await idle.newAccount('1')
      const parent = await submit(idle, own, [chatLine('x'), chatLine('y')])
      await idle.request(`/v1/batches/${parent.id}`, own, { method: 'DELETE' })
      await ended(idle, own, parent.id)

      const bad = async (init: RequestInit, param: string) => {
        const response = await retry(idle, own, parent.id, init)
        expect(response.status).toBe(400)
        expect(((await response.json()) as Refusal).error.param).toBe(param)
      }
      const json = (body: unknown) => ({
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      await bad(json({ completion_window_hours: 0 }), 'completion_window_hours')
      await bad(json({ completion_window: '24h' }), 'completion_window')
      // Names an object has by its prototype are fields like any other: refused, not taken.
      await bad(json({ constructor: 1 }), 'constructor')
      await bad({ ...json({}), body: '{"__proto__": {"x": 1}}' }, '__proto__')
      await bad(json({ max_cost_usd: '0' }), 'max_cost_usd')
      await bad(json({ max_cost_usd: '1e3' }), 'max_cost_usd')
      const notObject = await retry(idle, own, parent.id, json([1]))
      expect(notObject.status).toBe(400)
      const viaQuery = await idle.request(
        `/v1/batches/${parent.id}/retry?completion_window_hours=169`,
        own,
        { method: 'POST' },
      )
      expect(viaQuery.status).toBe(400)

      // A spend cap, as a submit takes it: the child holds min(ceiling, cap) and shows its cap.
      const capped = await retry(idle, own, parent.id, json({ max_cost_usd: '0.00001' }))
      expect(capped.status).toBe(201)
      const cappedChild = (await capped.json()) as Batch & {
        max_cost_usd: string | null
        cost_ceiling_usd: string
      }
      expect(cappedChild.max_cost_usd).toBe('0.00001')
      expect(Number(cappedChild.cost_ceiling_usd)).toBeGreaterThan(0.00001)
      const held = (await (await idle.admin(`/accounts/${accountId}`)).json()) as {
        held_usd: string
      }
      expect(held.held_usd).toBe('0.000010')
      await idle.request(`/v1/batches/${cappedChild.id}`, own, { method: 'DELETE' })
      await ended(idle, own, cappedChild.id)

      // The same Idempotency-Key twice: one child, returned both times.
      const headers = { 'idempotency-key': 'retry-once' }
      const first = await retry(idle, own, parent.id, { headers })
      expect(first.status).toBe(201)
      const again = await retry(idle, own, parent.id, { headers })
      expect(again.status).toBe(200)
      const child = (await first.json()) as Batch
      expect(((await again.json()) as Batch).id).toBe(child.id)
      expect((await read(idle, own, parent.id)).retried_by).toEqual([cappedChild.id, child.id])
      // The key again with other options: refused, naming the child it made; no child more.
      const reused = await retry(idle, own, parent.id, {
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ completion_window_hours: 48 }),
      })
      expect(reused.status).toBe(422)
      expect(((await reused.json()) as Refusal).error).toMatchObject({
        code: 'idempotency_key_reused',
        batch_id: child.id,
      })
      // The parent's own window sent is the request that left it out: the same child.
      const sameWindow = await retry(idle, own, parent.id, {
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ completion_window_hours: parent.completion_window_hours }),
      })
      expect(sameWindow.status).toBe(200)
      expect(((await sameWindow.json()) as Batch).id).toBe(child.id)
      // The key on another batch's retry: refused too.
      const otherParent = await submit(idle, own, [chatLine('z')])
      await idle.request(`/v1/batches/${otherParent.id}`, own, { method: 'DELETE' })
      await ended(idle, own, otherParent.id)
      const elsewhere = await retry(idle, own, otherParent.id, { headers })
      expect(elsewhere.status).toBe(422)
      expect((await read(idle, own, otherParent.id)).retried_by).toEqual([])
      expect((await read(idle, own, parent.id)).retried_by).toEqual([cappedChild.id, child.id])

      // The child's ceiling is held: with the credit gone, the next retry is refused 402.
      await idle.request(`/v1/batches/${child.id}`, own, { method: 'DELETE' })
      await ended(idle, own, child.id)
      const { balance_usd } = (await (await idle.admin(`/accounts/${accountId}`)).json()) as {
        balance_usd: string
      }
      const removed = await idle.admin(`/accounts/${accountId}/credits`, {
        body: { amount_usd: `-${balance_usd}` },
      })
      expect(removed.status).toBe(200)
      const broke = await retry(idle, own, parent.id)
      expect(broke.status).toBe(402)
      expect(((await broke.json()) as Refusal).error.code).toBe('insufficient_quota')
      expect((await read(idle, own, parent.id)).retried_by).toEqual([cappedChild.id, child.id])
    })
  })
}

describe("retry against today's catalog", () => {
  test('a line whose model left the catalog is an issue on the parent’s own line number', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mg-retry-'))
    const withModel = testCatalog({ openai: 'http://127.0.0.1:9/v1' })
    const first = await startTestGateway({
      catalog: withModel,
      env: { MULTIGRID_DISPATCH: '0', MULTIGRID_DATA_DIR: dataDir },
    })
    let parentId = ''
    let key = ''
    try {
      key = (await first.newAccount('5')).key
      const created = await first.request('/v1/batches', key, {
        method: 'POST',
        body: jsonl([chatLine('a'), chatLine('gone', 'hi', {}, 'sim/strict'), chatLine('c')]),
      })
      parentId = ((await created.json()) as Batch).id
      await first.request(`/v1/batches/${parentId}`, key, { method: 'DELETE' })
    } finally {
      await first.stop()
    }
    // The operator removes sim/strict from the catalog.
    const today = {
      ...withModel,
      models: withModel.models.filter((model) => model.id !== 'sim/strict'),
    }
    const second = await startTestGateway({
      catalog: today,
      env: { MULTIGRID_DISPATCH: '0', MULTIGRID_DATA_DIR: dataDir },
    })
    try {
      const response = await second.request(`/v1/batches/${parentId}/retry`, key, {
        method: 'POST',
      })
      expect(response.status).toBe(400)
      const body = (await response.json()) as Refusal & {
        issues: { line: number; custom_id: string; path: string }[]
      }
      expect(body.error.code).toBe('invalid_batch_file')
      expect(body.issues).toEqual([
        expect.objectContaining({ line: 2, custom_id: 'gone', path: 'body.model' }),
      ])
      const parent = (await (await second.request(`/v1/batches/${parentId}`, key)).json()) as Batch
      expect(parent.retried_by).toEqual([])
    } finally {
      await second.stop()
    }
  })
})
