/**
 * docs/operations.md's pictures: GET /v1/usage adds up the account's batch lines and live calls exactly as
 * they were charged (both stores), refuses bad ranges with a fix, and GET /metrics is valid
 * Prometheus text whose counters match what ran.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import {
  chatLine,
  jsonl,
  startTestGateway,
  TEST_DATABASE_URL,
  type TestGateway,
} from '../helpers/gateway.ts'
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.ts'
import { runSomeUsage, usageCatalog, type RanUsage } from '../helpers/usage-run.ts'
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.ts'
import { waitFor } from '../helpers/wait.ts'

const today = () => new Date().toISOString().slice(0, 10)
const sum = (rows: any[], field: string) => rows.reduce((t, r) => t + r[field], 0)
const sumCost = (rows: any[]) => rows.reduce((t, r) => t.plus(r.cost_usd), new Decimal(0))

const STORES: ('sqlite' | 'postgres')[] = TEST_DATABASE_URL ? ['sqlite', 'postgres'] : ['sqlite']
for (const storeKind of STORES) {
  describe(`GET /v1/usage and GET /metrics (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    let receiver: WebhookReceiver
    let ran: RanUsage
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 5 })
      receiver = startWebhookReceiver()
      gw = await startTestGateway({
        store: storeKind,
        catalog: usageCatalog(sim.url),
        env: { MULTIGRID_POLL_MS: '50', MULTIGRID_WEBHOOK_ALLOW_PRIVATE: 'true' },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await sim.stop()
      await receiver.stop()
    })

    test('the usage adds up to what the account was charged, grouped by day, model and provider', async () => {
      ran = await runSomeUsage(gw)
      const usage = async (query: string) => {
        const response = await gw.request(`/v1/usage?${query}`, ran.key)
        expect(response.status).toBe(200)
        const body = (await response.json()) as { object: string; data: any[] }
        expect(body.object).toBe('list')
        return body.data
      }
      const day = today()
      const byModel = await usage(`from=${day}&to=${day}&group_by=model`)
      expect(byModel.map((r) => r.model)).toEqual(['sim/chat', 'sim/routed'])
      for (const row of byModel) {
        expect(Object.keys(row).sort()).toEqual(
          [
            'cached_input_tokens',
            'cost_usd',
            'input_tokens',
            'lines',
            'live_calls',
            'model',
            'output_tokens',
          ].sort(),
        )
      }
      expect(byModel.find((r) => r.model === 'sim/routed')).toMatchObject({
        lines: 6,
        live_calls: 0,
      })
      expect(byModel.find((r) => r.model === 'sim/chat')).toMatchObject({ lines: 2, live_calls: 2 })
      expect(sumCost(byModel).equals(ran.charged)).toBe(true)
      expect(sum(byModel, 'input_tokens')).toBe(ran.input)
      expect(sum(byModel, 'output_tokens')).toBe(ran.output)
      expect(sum(byModel, 'cached_input_tokens')).toBe(0)

      // The planner sent every routed line to the cheaper offering.
      const byProvider = await usage(`from=${day}&to=${day}&group_by=provider`)
      expect(byProvider.map((r) => r.provider)).toEqual(['sim'])
      expect(byProvider[0].start).toBeUndefined()
      expect(sumCost(byProvider).equals(ran.charged)).toBe(true)

      // By day (the default grouping): every day of the range, zeros included.
      const yesterday = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10)
      const byDay = await usage(`from=${yesterday}&to=${day}`)
      expect(byDay.map((r) => r.start)).toEqual([yesterday, day])
      expect(byDay[0]).toEqual({
        start: yesterday,
        lines: 0,
        live_calls: 0,
        input_tokens: 0,
        cached_input_tokens: 0,
        output_tokens: 0,
        cost_usd: '0.000000',
      })
      expect(byDay[1].model).toBeUndefined()
      expect(byDay[1]).toMatchObject({ lines: 8, live_calls: 2, input_tokens: ran.input })
      expect(new Decimal(byDay[1].cost_usd).equals(ran.charged)).toBe(true)

      // Another account sees none of it.
      const other = await gw.newAccount('1')
      const theirs = await gw.request(`/v1/usage?from=${day}&to=${day}&group_by=model`, other.key)
      expect(((await theirs.json()) as { data: unknown[] }).data).toEqual([])
    })

    test('bad ranges are refused with what to send instead', async () => {
      const refused = async (query: string, param: string, words: string) => {
        const response = await gw.request(`/v1/usage?${query}`, ran.key)
        expect(response.status).toBe(400)
        const { error } = (await response.json()) as { error: Record<string, unknown> }
        expect(error).toMatchObject({ type: 'invalid_request_error', param })
        expect(String(error.message)).toContain(words)
      }
      await refused('to=2026-11-30', 'from', 'from is required')
      await refused('from=2026-11-01&to=2026-02-30', 'to', 'YYYY-MM-DD')
      await refused('from=2026-11-30&to=2026-11-01', 'to', 'before from')
      await refused('from=2025-01-01&to=2026-02-05', 'to', 'at most 400 days')
      await refused(
        'from=2026-11-01&to=2026-11-30&group_by=week',
        'group_by',
        'day, model or provider',
      )
      // 400 days, `to` included, is allowed.
      const most = await gw.request('/v1/usage?from=2025-01-01&to=2026-02-04', ran.key)
      expect(most.status).toBe(200)
      expect(((await most.json()) as { data: unknown[] }).data).toHaveLength(400)
      expect((await gw.request(`/v1/usage?from=${today()}&to=${today()}`, null)).status).toBe(401)
    })

    test('/metrics is valid Prometheus text with the lines, spend, queue, latency and webhooks', async () => {
      // A webhook, and a batch whose end it is told of.
      const hook = await gw.request('/v1/webhooks', ran.key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ url: `${receiver.url}/hook` }),
      })
      expect(hook.status).toBe(201)
      const batch = await gw.request('/v1/batches', ran.key, {
        method: 'POST',
        body: jsonl([chatLine('w-1', 'tell the hook')]),
      })
      expect(batch.status).toBe(201)
      await waitFor('the webhook delivery', async () => receiver.at('/hook').some((d) => d.acked))
      await Bun.sleep(100)

      const response = await fetch(`${gw.url}/metrics`)
      expect(response.status).toBe(200)
      expect(response.headers.get('content-type')).toStartWith('text/plain; version=0.0.4')
      const metrics = parsePrometheusText(await response.text())
      for (const name of metrics.types.keys()) {
        expect(name).toStartWith('multigrid_')
        expect(metrics.help.has(name)).toBe(true)
      }
      expect(metrics.types.get('multigrid_lines_total')).toBe('counter')
      expect(metrics.types.get('multigrid_upstream_latency_seconds')).toBe('histogram')
      expect(metrics.types.get('multigrid_queue_depth')).toBe('gauge')
      const lines = (status: string, provider: string) =>
        sampleValue(metrics, 'multigrid_lines_total', { status, provider })
      expect(lines('succeeded', 'sim')).toBe(9)
      expect(lines('succeeded', 'sim-dear')).toBeUndefined()
      expect(sampleValue(metrics, 'multigrid_live_calls_total', { provider: 'sim' })).toBe(2)
      // Spend shown as a float: the charges to within float rounding.
      const spend = sampleValue(metrics, 'multigrid_spend_usd_total', { provider: 'sim' })!
      const oneMore = new Decimal(1).minus(
        ((await (await gw.admin(`/accounts/${ran.accountId}`)).json()) as { balance_usd: string })
          .balance_usd,
      )
      expect(Math.abs(spend - oneMore.toNumber())).toBeLessThan(1e-12)
      expect(sampleValue(metrics, 'multigrid_queue_depth')).toBe(0)
      expect(sampleValue(metrics, 'multigrid_lines_in_flight')).toBe(0)
      // 9 lines and 2 live calls upstream, each timed.
      const calls = sampleValue(metrics, 'multigrid_upstream_latency_seconds_count', {
        provider: 'sim',
      })!
      expect(calls).toBe(11)
      expect(
        sampleValue(metrics, 'multigrid_upstream_latency_seconds_bucket', {
          provider: 'sim',
          le: '+Inf',
        }),
      ).toBe(11)
      expect(
        sampleValue(metrics, 'multigrid_upstream_latency_seconds_sum', { provider: 'sim' }),
      ).toBeGreaterThan(0)
      expect(
        sampleValue(metrics, 'multigrid_webhook_attempts_total', { result: 'delivered' }),
      ).toBeGreaterThanOrEqual(1)
    })

    test('lines a cancel ends, at once or handed back later, are counted cancelled with no provider', async () => {
      const cancelled = async () =>
        sampleValue(
          parsePrometheusText(await (await fetch(`${gw.url}/metrics`)).text()),
          'multigrid_lines_total',
          { status: 'cancelled', provider: 'none' },
        ) ?? 0
      const before = await cancelled()
      const { key } = await gw.newAccount('1')
      // Slow answers, 64 slots: some lines in flight, some waiting for a slot, most pending at the cancel.
      sim.configure({ latencyMs: 1_000 })
      try {
        const lines = Array.from({ length: 300 }, (_, i) => chatLine(`c-${i}`, `cancel ${i}`))
        const submitted = await gw.request('/v1/batches', key, {
          method: 'POST',
          body: jsonl(lines),
        })
        const { id } = (await submitted.json()) as { id: string }
        await waitFor('lines in flight', async () => sim.stats().inFlight > 0)
        expect((await gw.request(`/v1/batches/${id}`, key, { method: 'DELETE' })).status).toBe(200)
        const batch = await waitFor('the batch to end', async () => {
          const view = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as any
          return view.status === 'cancelled' ? view : null
        })
        expect(batch.request_counts.cancelled).toBeGreaterThan(0)
        expect((await cancelled()) - before).toBe(batch.request_counts.cancelled)
      } finally {
        sim.configure({ latencyMs: 5 })
      }
    })

    test('a failed line is counted under its catalog model when it names it by an alias', async () => {
      const { key } = await gw.newAccount('1')
      const lines = [
        chatLine('by-alias', 'refused', {}, 'refused-alias'),
        chatLine('by-id', 'refused too', {}, 'sim/refused'),
        chatLine('ok-alias', 'answered', {}, 'chat-small'),
      ]
      const submitted = await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      expect(submitted.status).toBe(201)
      const { id } = (await submitted.json()) as { id: string }
      await waitFor('the batch to end', async () => {
        const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as any
        return batch.status === 'completed' && batch.request_counts.failed === 2
      })
      await Bun.sleep(50)
      const day = today()
      const response = await gw.request(`/v1/usage?from=${day}&to=${day}&group_by=model`, key)
      const rows = ((await response.json()) as { data: any[] }).data
      expect(rows.map((row) => [row.model, row.lines])).toEqual([
        ['sim/chat', 1],
        ['sim/refused', 2],
      ])
      // Their upstream refusals are counted by provider and kind, once each (no retry of a 400).
      const metrics = parsePrometheusText(await (await fetch(`${gw.url}/metrics`)).text())
      expect(metrics.types.get('multigrid_upstream_errors_total')).toBe('counter')
      expect(
        sampleValue(metrics, 'multigrid_upstream_errors_total', {
          provider: 'sim',
          kind: 'invalid_request',
        }),
      ).toBe(2)
    })
  })
}

test('/metrics behind MULTIGRID_METRICS_TOKEN when it is set', async () => {
  const token = 'metrics-token-0123456789'
  const gw = await startTestGateway({
    env: { MULTIGRID_DISPATCH: '0', MULTIGRID_METRICS_TOKEN: token },
  })
  try {
    const open = await fetch(`${gw.url}/metrics`)
    expect(open.status).toBe(401)
    expect(((await open.json()) as { error: { message: string } }).error.message).toContain(
      'MULTIGRID_METRICS_TOKEN',
    )
    const scraped = await fetch(`${gw.url}/metrics`, {
      headers: { authorization: `Bearer ${token}` },
    })
    expect(scraped.status).toBe(200)
    expect(parsePrometheusText(await scraped.text()).types.size).toBeGreaterThan(0)
    // The scheme in any case, as for API keys; a token one character off is refused.
    const lower = await fetch(`${gw.url}/metrics`, {
      headers: { authorization: `bearer ${token}` },
    })
    expect(lower.status).toBe(200)
    await lower.text()
    const near = await fetch(`${gw.url}/metrics`, {
      headers: { authorization: `Bearer ${token.slice(0, -1)}X` },
    })
    expect(near.status).toBe(401)
  } finally {
    await gw.stop()
  }
})
