/**
 * OpenTelemetry end to end: a real OTLP/HTTP receiver on 127.0.0.1, a gateway exporting to it,
 * a batch and a live call against the simulator; then the spans and metrics that arrived.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { createTelemetry, noTelemetry } from '../../src/telemetry/telemetry.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

type AnyValue = {
  stringValue?: string
  intValue?: number | string
  doubleValue?: number
  boolValue?: boolean
}
type KeyValue = { key: string; value: AnyValue }
type OtlpSpan = {
  traceId: string
  spanId: string
  parentSpanId?: string
  name: string
  kind: number
  attributes: KeyValue[]
  links?: { traceId: string; spanId: string }[]
  status?: { code?: number }
}
type DataPoint = {
  attributes: KeyValue[]
  asInt?: number | string
  asDouble?: number
  count?: number | string
}
type OtlpMetric = {
  name: string
  sum?: { dataPoints: DataPoint[] }
  gauge?: { dataPoints: DataPoint[] }
  histogram?: { dataPoints: DataPoint[] }
}

const valueOf = (v: AnyValue) =>
  v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.doubleValue ?? v.boolValue))
const attrs = (list: KeyValue[] = []) =>
  Object.fromEntries(list.map((a) => [a.key, valueOf(a.value)]))
const pointValue = (p: DataPoint) => Number(p.asInt ?? p.asDouble ?? p.count ?? 0)

/** A collector stand-in: keeps every OTLP/HTTP JSON export it is sent. */
function startReceiver() {
  const traces: {
    resourceSpans: { resource: { attributes: KeyValue[] }; scopeSpans: { spans: OtlpSpan[] }[] }[]
  }[] = []
  const metrics: { resourceMetrics: { scopeMetrics: { metrics: OtlpMetric[] }[] }[] }[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const path = new URL(request.url).pathname
      if (request.method !== 'POST') return new Response(null, { status: 405 })
      if (!(request.headers.get('content-type') ?? '').includes('json'))
        return new Response('JSON only', { status: 415 })
      const body = await request.json()
      if (path === '/v1/traces') traces.push(body as never)
      else if (path === '/v1/metrics') metrics.push(body as never)
      else return new Response(null, { status: 404 })
      return Response.json({})
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    traces,
    metrics,
    spans: () =>
      traces.flatMap((t) => t.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))),
    metric: (name: string) =>
      metrics
        .flatMap((m) => m.resourceMetrics.flatMap((r) => r.scopeMetrics.flatMap((s) => s.metrics)))
        .filter((m) => m.name === name),
    stop: () => server.stop(true),
  }
}

describe('telemetry', () => {
  let sim: Simulator
  let receiver: ReturnType<typeof startReceiver>
  let gw: TestGateway
  let batch: { id: string; cost_ceiling_usd: string; request_counts: Record<string, number> }

  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 5 })
    receiver = startReceiver()
    gw = await startTestGateway({
      upstreams: { openai: `${sim.url}/v1` },
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, MULTIGRID_POLL_MS: '50' },
    })
    const { key } = await gw.newAccount('10')
    const lines = [
      chatLine('a', 'one'),
      chatLine('b', 'two'),
      chatLine('refused', 'three', {}, 'sim/refused'),
    ]
    const created = await gw.request('/v1/batches?name=otel', key, {
      method: 'POST',
      body: jsonl(lines),
    })
    expect(created.status).toBe(201)
    const { id } = (await created.json()) as { id: string }
    batch = await waitFor('the batch to finish', async () => {
      const b = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as typeof batch & {
        status: string
      }
      return FINAL_BATCH.includes(b.status) ? b : null
    })
    const chat = (content: string, stream: boolean) =>
      gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'sim/chat',
          messages: [{ role: 'user', content }],
          max_tokens: 16,
          ...(stream ? { stream } : {}),
        }),
      })
    const live = await chat('live', false)
    expect(live.status).toBe(200)
    const streamed = await chat('stream', true)
    expect(await streamed.text()).toContain('data: [DONE]')
    // A stream that breaks after it opened: an error of its provider's all the same.
    sim.configure({ malformedRate: 1 })
    const broken = await chat('broken', true)
    expect(await broken.text()).toContain('upstream_error')
    sim.configure({ malformedRate: 0 })
    // An Idempotency-Key sent again with another file: refused at admission.
    const keyed = (content: string) =>
      gw.request('/v1/batches?name=otel-keyed', key, {
        method: 'POST',
        body: jsonl([chatLine('k', content)]),
        headers: { 'idempotency-key': 'otel-once' },
      })
    const first = await keyed('first')
    expect(first.status).toBe(201)
    expect((await keyed('second')).status).toBe(422)
    const { id: keyedId } = (await first.json()) as { id: string }
    await waitFor('the keyed batch to finish', async () => {
      const b = (await (await gw.request(`/v1/batches/${keyedId}`, key)).json()) as {
        status: string
      }
      return FINAL_BATCH.includes(b.status)
    })
    // A key allowed one request a minute: its second request is a rate-limit rejection.
    const { key: slow } = await gw.newAccount('1', { rate_limit_per_minute: 1 })
    expect((await gw.request('/v1/batches', slow)).status).toBe(200)
    expect((await gw.request('/v1/batches', slow)).status).toBe(429)
    // Stopping flushes the span processor and makes the metric reader's last export.
    await gw.stop()
  })
  afterAll(async () => {
    receiver.stop()
    await sim.stop()
  })

  test('spans arrive over OTLP/HTTP with the service name', () => {
    expect(receiver.traces.length).toBeGreaterThan(0)
    const resource = attrs(receiver.traces[0].resourceSpans[0].resource.attributes)
    expect(resource['service.name']).toBe('multigrid')
  })

  test('one server span per HTTP request, with method, route and status', () => {
    const spans = receiver.spans()
    const submit = spans.find((s) => s.name === 'POST /v1/batches')!
    expect(submit).toBeDefined()
    expect(attrs(submit.attributes)).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/v1/batches',
      'http.response.status_code': 201,
    })
    expect(submit.kind).toBe(2) // SERVER
    const reads = spans.filter((s) => s.name === 'GET /v1/batches/:id')
    expect(reads.length).toBeGreaterThan(0)
    expect(attrs(reads[0].attributes)['http.response.status_code']).toBe(200)
    const limited = spans.filter(
      (s) =>
        s.name === 'GET /v1/batches' && attrs(s.attributes)['http.response.status_code'] === 429,
    )
    expect(limited).toHaveLength(1)
  })

  test('the admission span is a child of its request and names the batch, its size and ceiling', () => {
    const spans = receiver.spans()
    const submit = spans.find((s) => s.name === 'POST /v1/batches')!
    const admit = spans.find(
      (s) => s.name === 'batch.admit' && attrs(s.attributes)['batch.id'] === batch.id,
    )!
    expect(admit).toBeDefined()
    expect(admit.traceId).toBe(submit.traceId)
    expect(admit.parentSpanId).toBe(submit.spanId)
    expect(attrs(admit.attributes)).toMatchObject({
      'batch.id': batch.id,
      'batch.line_count': 3,
      'batch.cost_ceiling_usd': batch.cost_ceiling_usd,
      'batch.result': 'created',
    })
  })

  test('an admission refused by a reused Idempotency-Key names it as the result and is not a failed span', () => {
    const refused = receiver
      .spans()
      .filter((s) => s.name === 'batch.admit')
      .filter((s) => attrs(s.attributes)['batch.result'] === 'idempotency_key_reused')
    expect(refused).toHaveLength(1)
    expect(refused[0].status?.code ?? 0).not.toBe(2) // ERROR
    expect(attrs(refused[0].attributes)['error.type']).toBeUndefined()
  })

  test('one client span per upstream call, linked to the batch, with provider, model, status, attempt and tokens', () => {
    const spans = receiver.spans()
    const admit = spans.find(
      (s) => s.name === 'batch.admit' && attrs(s.attributes)['batch.id'] === batch.id,
    )!
    const calls = spans.filter((s) => attrs(s.attributes)['batch.id'] === batch.id && s.kind === 3) // CLIENT
    expect(calls).toHaveLength(3)
    for (const call of calls) {
      expect(call.links?.[0]).toMatchObject({ traceId: admit.traceId, spanId: admit.spanId })
      const a = attrs(call.attributes)
      expect(a['gen_ai.provider.name']).toBe('sim')
      expect(a['line.attempt']).toBe(1)
      expect([1, 2, 3]).toContain(a['batch.line'] as number)
    }
    const ok = calls.filter((s) => attrs(s.attributes)['gen_ai.request.model'] === 'sim-chat')
    expect(ok).toHaveLength(2)
    for (const call of ok) {
      const a = attrs(call.attributes)
      expect(call.name).toBe('chat sim-chat')
      expect(a['http.response.status_code']).toBe(200)
      expect(a['gen_ai.usage.input_tokens']).toBeGreaterThan(0)
      expect(a['gen_ai.usage.output_tokens']).toBeGreaterThan(0)
    }
    const refused = calls.find((s) => attrs(s.attributes)['gen_ai.request.model'] === 'fail-400')!
    expect(attrs(refused.attributes)).toMatchObject({
      'http.response.status_code': 400,
      'error.type': 'invalid_request',
    })
    expect(refused.status?.code).toBe(2) // ERROR
  })

  test('a live call, streamed or not, is a child of its HTTP request span, with its tokens', () => {
    const spans = receiver.spans()
    const requests = spans.filter((s) => s.name === 'POST /v1/chat/completions')
    expect(requests).toHaveLength(3)
    const calls = requests.map((request) => {
      const call = spans.find((s) => s.kind === 3 && s.parentSpanId === request.spanId)!
      expect(call).toBeDefined()
      expect(call.traceId).toBe(request.traceId)
      expect(attrs(call.attributes)['batch.id']).toBeUndefined()
      return attrs(call.attributes)
    })
    // The two that answered carry their tokens; the stream that broke says what broke it.
    expect(calls.filter((a) => Number(a['gen_ai.usage.output_tokens']) > 0)).toHaveLength(2)
    expect(calls.filter((a) => a['error.type'] === 'malformed_response')).toHaveLength(1)
  })

  test('metrics: lines completed, upstream latency and errors by provider, rate-limit rejections, queue gauges', () => {
    const sumBy = (name: string, key: string) => {
      const totals: Record<string, number> = {}
      for (const metric of receiver.metric(name)) {
        for (const point of metric.sum?.dataPoints ?? []) {
          // Cumulative temporality: the last export holds the totals.
          totals[String(attrs(point.attributes)[key])] = pointValue(point)
        }
      }
      return totals
    }
    // The batch's two good lines and the keyed batch's one; the refused line.
    expect(sumBy('multigrid.lines.completed', 'status')).toEqual({ succeeded: 3, failed: 1 })
    expect(sumBy('multigrid.upstream.errors', 'error.type')).toEqual({
      invalid_request: 1,
      malformed_response: 1,
    })
    expect(sumBy('multigrid.rate_limit.rejections', 'limit')).toEqual({ requests_per_minute: 1 })
    const latency = receiver.metric('multigrid.upstream.duration').at(-1)!
    const bySim = latency.histogram!.dataPoints.filter(
      (p) => attrs(p.attributes)['gen_ai.provider.name'] === 'sim',
    )
    // Three batch lines, the keyed batch's one, three live calls.
    expect(bySim.reduce((n, p) => n + pointValue(p), 0)).toBe(7)
    expect(
      latency.histogram!.dataPoints.some((p) => attrs(p.attributes).outcome === 'invalid_request'),
    ).toBe(true)
    for (const name of ['multigrid.queue.pending_lines', 'multigrid.lines.in_flight']) {
      const gauge = receiver.metric(name).at(-1)!
      expect(gauge.gauge!.dataPoints).toHaveLength(1)
      expect(pointValue(gauge.gauge!.dataPoints[0])).toBe(0) // everything ran
    }
    expect(receiver.metric('http.server.request.duration').length).toBeGreaterThan(0)
  })
})

describe('telemetry switched off', () => {
  test('without an endpoint no SDK is started: the shared no-op, which only runs what it is given', async () => {
    const telemetry = createTelemetry({ otlp: null, serviceName: 'multigrid' })
    expect(telemetry).toBe(noTelemetry)
    expect(telemetry.enabled).toBe(false)
    const response = new Response('ok')
    expect(
      await telemetry.request(
        new Request('http://localhost/'),
        async () => response,
        () => null,
      ),
    ).toBe(response)
    expect(
      await telemetry.upstream(
        { provider: 'p', model: 'm', endpoint: 'chat' },
        async () => 7,
        () => {
          throw new Error('not called')
        },
      ),
    ).toBe(7)
  })
})
