/**
 * Why a batch waits (docs/routing.md `waiting`) and where its lines went (`routing.providers`), over real
 * HTTP with the simulator as the upstream: a provider that answers 429 with a Retry-After makes
 * the batch wait `provider_rate_limited` until it resumes, then the batch moves and `waiting` is
 * null again; the breakdown per provider adds up to the batch's own counts and cost.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { freePort } from '../helpers/process-gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

interface NativeBatch {
  id: string
  status: string
  cost_usd: string
  request_counts: { succeeded: number; failed: number }
  max_cost_usd: string | null
  routing: {
    providers: Record<
      string,
      { succeeded: number; failed: number; running: number; cost_usd: string }
    >
    eta: number | null
  }
  waiting: { code: string; message: string; until?: number } | null
}

for (const storeKind of STORES) {
  describe(`batch waiting and routing (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    let key: string

    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 5 })
      gw = await startTestGateway({
        store: storeKind,
        upstreams: { openai: `${sim.url}/v1` },
        env: { MULTIGRID_POLL_MS: '50' },
      })
      ;({ key } = await gw.newAccount('100'))
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    const submit = async (count: number) => {
      const lines = Array.from({ length: count }, (_, i) => chatLine(`l${i}`, `question ${i}`))
      const response = await gw.request('/v1/batches', key, {
        method: 'POST',
        body: jsonl(lines),
        headers: { 'content-type': 'application/jsonl' },
      })
      expect(response.status).toBe(201)
      return (await response.json()) as NativeBatch
    }
    const read = async (id: string) =>
      (await (await gw.request(`/v1/batches/${id}`, key)).json()) as NativeBatch

    test("a batch held back by a pause another batch's 429 caused waits provider_rate_limited too", async () => {
      sim.configure({ rate429: 1, retryAfterSeconds: 4 })
      try {
        const first = await submit(1)
        await waitFor('the pause', async () => (sim.stats().byStatus['429'] ?? 0) > 0)
        const refused = sim.stats().byStatus['429']
        // Another account's batch, after the pause began: none of its lines is sent meanwhile.
        const other = await gw.newAccount('10')
        const response = await gw.request('/v1/batches', other.key, {
          method: 'POST',
          body: jsonl([chatLine('o', 'other')]),
        })
        const { id } = (await response.json()) as { id: string }
        const waiting = await waitFor(
          'the second batch to say why it waits',
          async () => {
            const batch = (await (
              await gw.request(`/v1/batches/${id}`, other.key)
            ).json()) as NativeBatch
            return batch.waiting ? batch : null
          },
          3_000,
        )
        expect(sim.stats().byStatus['429']).toBe(refused)
        expect(waiting.waiting!.code).toBe('provider_rate_limited')
        expect(waiting.waiting!.message).toContain('sim answered 429')
        expect(waiting.waiting!.until! * 1000).toBeGreaterThan(Date.now())
        sim.configure({ rate429: 0 })
        for (const [batchId, owner] of [
          [first.id, key],
          [id, other.key],
        ])
          await waitFor(
            'both to finish',
            async () =>
              ((await (await gw.request(`/v1/batches/${batchId}`, owner)).json()) as NativeBatch)
                .status === 'completed',
            30_000,
          )
      } finally {
        sim.configure({ rate429: 0, retryAfterSeconds: null })
      }
    })

    test('a 429 with Retry-After makes the batch wait provider_rate_limited until it resumes', async () => {
      sim.configure({ rate429: 1, retryAfterSeconds: 3 })
      const created = await submit(4)
      expect(created.waiting).toBeNull()
      expect(created.max_cost_usd).toBeNull()
      expect(created.routing).toEqual({ providers: {}, eta: null })
      const sentAt = Date.now()
      const waiting = await waitFor('the batch to wait on the 429', async () => {
        const batch = await read(created.id)
        return batch.waiting ? batch : null
      })
      expect(waiting.waiting!.code).toBe('provider_rate_limited')
      // Resumes when the provider said: 3 s after its answer (Unix seconds, rounded up).
      const until = waiting.waiting!.until!
      expect(until).toBeGreaterThanOrEqual(Math.floor(sentAt / 1000) + 3)
      expect(until).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 4)
      const resumeAt = new Date(until * 1000).toISOString().slice(11, 19)
      expect(waiting.waiting!.message).toContain('sim answered 429')
      expect(waiting.waiting!.message).toContain(`dispatch resumes at ${resumeAt} UTC`)
      expect(waiting.waiting!.message).toContain('Nothing to do: do not resubmit.')
      // The listing serves the same object.
      const listed = (await (await gw.request('/v1/batches', key)).json()) as {
        data: NativeBatch[]
      }
      expect(listed.data.find((b) => b.id === created.id)!.waiting!.code).toBe(
        'provider_rate_limited',
      )

      sim.configure({ rate429: 0 })
      const done = await waitFor(
        'the batch to finish',
        async () => {
          const batch = await read(created.id)
          return FINAL_BATCH.includes(batch.status) ? batch : null
        },
        30_000,
      )
      expect(done.status).toBe('completed')
      expect(done.waiting).toBeNull()
      expect(Date.now()).toBeGreaterThanOrEqual(until * 1000 - 1000)
    })

    test('routing.providers counts the calls in flight to a provider while they run', async () => {
      sim.configure({ rate429: 0, retryAfterSeconds: null, latencyMs: 1500 })
      const created = await submit(3)
      const running = await waitFor('the calls to be counted', async () => {
        const batch = await read(created.id)
        return batch.routing.providers.sim?.running === 3 ? batch : null
      })
      expect(running.routing.providers.sim).toMatchObject({ succeeded: 0, failed: 0 })
      const done = await waitFor('the batch to finish', async () => {
        const batch = await read(created.id)
        return FINAL_BATCH.includes(batch.status) ? batch : null
      })
      expect(done.routing.providers.sim).toMatchObject({ succeeded: 3, running: 0 })
      sim.configure({ latencyMs: 5 })
    })

    test('waiting is null while lines progress, and routing.providers adds up to the batch', async () => {
      sim.configure({ rate429: 0, retryAfterSeconds: null })
      const created = await submit(6)
      const done = await waitFor('the batch to finish', async () => {
        const batch = await read(created.id)
        expect(batch.waiting).toBeNull()
        return FINAL_BATCH.includes(batch.status) ? batch : null
      })
      expect(done.status).toBe('completed')
      expect(done.routing.eta).toBeNull()
      expect(done.routing.providers).toEqual({
        sim: { succeeded: 6, failed: 0, running: 0, cost_usd: done.cost_usd },
      })
      expect(Number(done.cost_usd)).toBeGreaterThan(0)
    })

    test('a submit repeated with its Idempotency-Key answers the batch with its routing, as GET does', async () => {
      sim.configure({ rate429: 0, retryAfterSeconds: null })
      const post = () =>
        gw.request('/v1/batches', key, {
          method: 'POST',
          body: jsonl([chatLine('i-1'), chatLine('i-2')]),
          headers: { 'content-type': 'application/jsonl', 'idempotency-key': 'routing-once' },
        })
      const created = (await (await post()).json()) as NativeBatch
      const done = await waitFor('the batch to finish', async () => {
        const batch = await read(created.id)
        return FINAL_BATCH.includes(batch.status) ? batch : null
      })
      const again = await post()
      expect(again.status).toBe(200)
      const repeated = (await again.json()) as NativeBatch
      expect(repeated.id).toBe(created.id)
      expect(repeated.routing.providers).toEqual(done.routing.providers)
      expect(repeated.routing.providers.sim.succeeded).toBe(2)
    })
  })
}

describe('a provider whose every replica is down', () => {
  test('makes the batch wait provider_unavailable, saying there is nothing to do', async () => {
    const down = freePort() // nothing listens there: every connection is refused
    const gw = await startTestGateway({
      upstreams: { openai: [`http://127.0.0.1:${down}/v1`, `http://127.0.0.1:${down}/v2`] },
      env: { MULTIGRID_POLL_MS: '50' },
    })
    try {
      const { key } = await gw.newAccount('10')
      const created = (await (
        await gw.request('/v1/batches', key, {
          method: 'POST',
          body: jsonl([chatLine('u-1'), chatLine('u-2')]),
          headers: { 'content-type': 'application/jsonl' },
        })
      ).json()) as NativeBatch
      const waiting = await waitFor('the batch to wait on the provider', async () => {
        const batch = (await (
          await gw.request(`/v1/batches/${created.id}`, key)
        ).json()) as NativeBatch
        return batch.waiting ? batch : null
      })
      expect(waiting.status).toBe('in_progress')
      expect(waiting.waiting!.code).toBe('provider_unavailable')
      expect(waiting.waiting!.message).toStartWith('sim is unavailable: every replica is failing.')
      expect(waiting.waiting!.message).toContain('Nothing to do: do not resubmit')
      expect(waiting.waiting).not.toHaveProperty('until')
    } finally {
      await gw.stop()
    }
  })
})
