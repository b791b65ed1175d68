/**
 * The flex lane (docs/pricing.md), over real HTTP: a model offered as flex and live by one OpenAI
 * provider, the simulator playing flex (slower, some calls refused 429 resource_unavailable).
 * Batch lines go to the cheaper flex lane and are sent `service_tier: "flex"`; a refused call is
 * busy, not an attempt: it waits and is sent again, every line succeeds with one attempt, at the
 * flex lane's prices, named "openai:flex" on its result line and in routing.providers. A live
 * call keeps the first offering, the live lane.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { nativeClient } from '../helpers/native-client.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

const LIVE = { input_usd_per_mtok: '1.25', output_usd_per_mtok: '10' }
const FLEX = { input_usd_per_mtok: '0.625', output_usd_per_mtok: '5' }
const LINES = 24

function catalog(sim: Simulator) {
  return {
    providers: {
      // As OpenAI's own: Responses requests go to it as they came, on either lane.
      openai: {
        kind: 'openai',
        base_url: `${sim.url}/v1`,
        max_concurrency: 8,
        timeout_s: 10,
        responses_api: true,
      },
    },
    models: [
      {
        id: 'sim/chat',
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 1024,
        offerings: [
          { provider: 'openai', upstream_model: 'sim-chat', ...LIVE },
          { provider: 'openai', upstream_model: 'sim-chat', lane: 'flex', timeout_s: 30, ...FLEX },
        ],
      },
      {
        // On the same flex lane, with a timeout of its own far below sim/chat's.
        id: 'sim/short',
        endpoints: ['chat'],
        context_tokens: 32000,
        max_output_tokens: 1024,
        offerings: [
          { provider: 'openai', upstream_model: 'sim-short', ...LIVE },
          { provider: 'openai', upstream_model: 'sim-short', lane: 'flex', timeout_s: 1, ...FLEX },
        ],
      },
    ],
  }
}

type Usage = { prompt_tokens: number; completion_tokens: number }
const priceAt = (rates: typeof LIVE, usage: Usage) =>
  new Decimal(rates.input_usd_per_mtok)
    .times(usage.prompt_tokens)
    .plus(new Decimal(rates.output_usd_per_mtok).times(usage.completion_tokens))
    .div(1_000_000)

for (const storeKind of STORES) {
  describe(`the flex lane (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({
        flexUnavailableRate: 0.3,
        flexLatencyMs: 20,
        keepBodies: 200,
        seed: 7,
      })
      gw = await startTestGateway({
        store: storeKind,
        catalog: catalog(sim),
        env: { MULTIGRID_POLL_MS: '50' },
      })
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    test('batch lines run on flex; refusals are waited out, not attempts; named openai:flex', async () => {
      const { key, accountId } = await gw.newAccount('10')
      const lines = Array.from({ length: LINES }, (_, i) => chatLine(`f-${i}`, `flex line ${i}`))
      const created = await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: string }
      type Batch = {
        status: string
        cost_usd: string
        request_counts: Record<string, number>
        routing: { providers: Record<string, { succeeded: number; cost_usd: string }> }
      }
      const batch = await waitFor(
        'the batch to finish',
        async () => {
          const b = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
          return FINAL_BATCH.includes(b.status) && b
        },
        60_000,
      )
      expect(batch.status).toBe('completed')
      expect(batch.request_counts.succeeded).toBe(LINES)
      // The simulator did refuse flex calls, and every one was sent again on the flex lane.
      expect(sim.stats().byFault.flex_unavailable ?? 0).toBeGreaterThan(0)
      const results = (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
        .trim()
        .split('\n')
        .map(
          (text) =>
            JSON.parse(text) as {
              status: string
              provider: string
              attempts: number
              cost_usd: string
              response: { body: { usage: Usage } }
            },
        )
      let total = new Decimal(0)
      for (const result of results) {
        expect(result.status).toBe('succeeded')
        expect(result.provider).toBe('openai:flex')
        expect(result.attempts).toBe(1)
        expect(new Decimal(result.cost_usd).equals(priceAt(FLEX, result.response.body.usage))).toBe(
          true,
        )
        total = total.plus(result.cost_usd)
      }
      expect(Object.keys(batch.routing.providers)).toEqual(['openai:flex'])
      expect(batch.routing.providers['openai:flex'].succeeded).toBe(LINES)
      expect(new Decimal(batch.cost_usd).equals(total)).toBe(true)
      const sent = sim.received().filter((r) => r.path === '/v1/chat/completions')
      expect(sent.length).toBeGreaterThan(LINES) // the refused calls were sent again
      for (const request of sent) expect(JSON.parse(request.text).service_tier).toBe('flex')
      const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
        balance_usd: string
      }
      expect(new Decimal(account.balance_usd).equals(new Decimal(10).minus(total))).toBe(true)
    })

    test('while flex refuses every call, the batch says it waits: provider_rate_limited, then null once it runs', async () => {
      const { key } = await gw.newAccount('10')
      sim.configure({ flexUnavailableRate: 1 })
      type Batch = {
        status: string
        waiting: { code: string; message: string; until: number } | null
      }
      const read = async (id: string) =>
        (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
      try {
        // The flex lane alone: the lines wait for it rather than spill.
        const lines = Array.from({ length: 4 }, (_, i) =>
          chatLine(`w-${i}`, `wait ${i}`, { provider: { only: ['openai:flex'] } }),
        )
        const created = await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
        expect(created.status).toBe(201)
        const { id } = (await created.json()) as { id: string }
        const waiting = await waitFor('the batch to say why it waits', async () => {
          const batch = await read(id)
          return batch.waiting ? batch : null
        })
        expect(waiting.status).toBe('in_progress')
        expect(waiting.waiting!.code).toBe('provider_rate_limited')
        expect(waiting.waiting!.message).toStartWith('openai:flex answered 429')
        // Still said while flex keeps refusing, its resume time moved on, not gone by.
        for (let i = 0; i < 12; i++) {
          await Bun.sleep(500)
          const batch = await read(id)
          expect(batch.waiting?.code).toBe('provider_rate_limited')
          expect(batch.waiting!.until).toBeGreaterThanOrEqual(Math.floor(Date.now() / 1000) - 2)
        }
        sim.configure({ flexUnavailableRate: 0 })
        const done = await waitFor(
          'the batch to finish',
          async () => {
            const batch = await read(id)
            return FINAL_BATCH.includes(batch.status) && batch
          },
          30_000,
        )
        expect(done.status).toBe('completed')
        expect(done.waiting).toBeNull()
      } finally {
        sim.configure({ flexUnavailableRate: 0.3 })
      }
    })

    test('a Responses line goes to the flex lane as it came, asking for flex, at the flex prices', async () => {
      const { key } = await gw.newAccount('10')
      const native = nativeClient<
        { id: string; status: string },
        { status: string; provider: string; cost_usd: string; response: { body: unknown } }
      >(
        () => gw,
        () => key,
      )
      const before = sim.received().length
      const line = {
        custom_id: 'r-1',
        method: 'POST',
        url: '/v1/responses',
        body: { model: 'sim/chat', input: 'a flex question', max_output_tokens: 16 },
      }
      const batch = await native.submit(jsonl([line]))
      await native.finished(batch.id)
      const [row] = await native.results(batch.id)
      expect(row.status).toBe('succeeded')
      expect(row.provider).toBe('openai:flex')
      const body = row.response.body as {
        object: string
        usage: { input_tokens: number; output_tokens: number }
      }
      expect(body.object).toBe('response')
      const usage = {
        prompt_tokens: body.usage.input_tokens,
        completion_tokens: body.usage.output_tokens,
      }
      expect(new Decimal(row.cost_usd).equals(priceAt(FLEX, usage))).toBe(true)
      const sent = sim.received().slice(before)
      expect(sent.length).toBeGreaterThan(0)
      for (const request of sent) {
        expect(request.path).toBe('/v1/responses')
        expect(JSON.parse(request.text).service_tier).toBe('flex')
      }
    })

    test("each flex offering's own timeout applies, not the longest on its lane", async () => {
      const { key } = await gw.newAccount('10')
      const native = nativeClient<
        { id: string; status: string },
        { status: string; provider: string }
      >(
        () => gw,
        () => key,
      )
      sim.configure({ flexLatencyMs: 3_000 })
      try {
        const batch = await native.submit(jsonl([chatLine('short', 'slow flex', {}, 'sim/short')]))
        await native.finished(batch.id)
        const [row] = await native.results(batch.id)
        // Cut at its 1 s, where sim/chat's 30 s would have waited the 3 s out on flex.
        expect(row.status).toBe('succeeded')
        expect(row.provider).toBe('openai')
      } finally {
        sim.configure({ flexLatencyMs: 20 })
      }
    }, 40_000)

    test('a live call flex refuses as out of capacity is a 503 upstream_busy (overloaded_error under /anthropic), nothing charged', async () => {
      const { key, accountId } = await gw.newAccount('10')
      sim.configure({ flexUnavailableRate: 1 })
      try {
        const body = {
          model: 'sim/chat',
          max_tokens: 16,
          messages: [{ role: 'user', content: 'hi' }],
          provider: { only: ['openai:flex'] },
        }
        const answer = await gw.request('/v1/chat/completions', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
        expect(answer.status).toBe(503)
        const refused = (await answer.json()) as { error: { code: string; message: string } }
        expect(refused.error.code).toBe('upstream_busy')
        expect(refused.error.message).toContain('at capacity')
        const messages = await gw.request('/anthropic/v1/messages', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
          body: JSON.stringify(body),
        })
        expect(messages.status).toBe(503)
        expect(((await messages.json()) as { error: { type: string } }).error.type).toBe(
          'overloaded_error',
        )
        const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
          balance_usd: string
        }
        expect(Number(account.balance_usd)).toBe(10)
      } finally {
        sim.configure({ flexUnavailableRate: 0.3 })
      }
    })

    test('a live call keeps the first offering: the live lane, at its prices', async () => {
      const { key } = await gw.newAccount('10')
      const before = sim.received().length
      const answer = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim/chat', messages: [{ role: 'user', content: 'hi' }] }),
      })
      expect(answer.status).toBe(200)
      const sent = sim.received().slice(before)
      expect(sent).toHaveLength(1)
      expect(JSON.parse(sent[0].text).service_tier).toBeUndefined()
      // A Responses call too, passed through to the live lane: no tier asked for.
      const responses = await gw.request('/v1/responses', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim/chat', input: 'hi', max_output_tokens: 16 }),
      })
      expect(responses.status).toBe(200)
      const [passed] = sim.received().slice(before + 1)
      expect(passed.path).toBe('/v1/responses')
      expect(JSON.parse(passed.text).service_tier).toBeUndefined()
      // The model list shows both lanes with their own prices.
      const models = (await (await gw.request('/v1/models', key)).json()) as {
        data: { id: string; pricing: Record<string, unknown>[] }[]
      }
      expect(models.data.find((m) => m.id === 'sim/chat')!.pricing).toEqual([
        { provider: 'openai', lane: 'live', ...LIVE },
        { provider: 'openai:flex', lane: 'flex', ...FLEX },
      ])
    })
  })
}
