/**
 * JSON logs: one line per event, LOG_LEVEL honoured, and never a secret or a prompt — checked on
 * everything a debug-level gateway writes while it runs a batch, a live call, the dashboard's
 * sign-in and the admin API.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import {
  ADMIN_TOKEN,
  chatLine,
  jsonl,
  startTestGateway,
  type TestGateway,
} from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

const PROMPT = 'the parcel never came, says Zebediah Quimby-42'
const LIVE_PROMPT = 'live question about the aubergine invoice 7731'
const PROVIDER_KEY = 'sk-ant-test-secret'

describe('logs at LOG_LEVEL=debug', () => {
  let sim: Simulator
  let claude: Simulator
  let gw: TestGateway
  const lines: string[] = []
  let apiKey = ''
  let batchId = ''

  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 2 })
    claude = await startSimulator({ latencyMs: 2, requireApiKey: PROVIDER_KEY })
    gw = await startTestGateway({
      upstreams: { openai: `${sim.url}/v1`, anthropic: claude.url },
      env: { LOG_LEVEL: 'debug', MULTIGRID_POLL_MS: '50' },
      logLines: lines,
    })
    const { key } = await gw.newAccount('10')
    apiKey = key
    const file = jsonl([
      chatLine('openai-line', PROMPT),
      chatLine('anthropic-line', PROMPT, {}, 'sim/claude'),
      chatLine('refused-line', PROMPT, {}, 'sim/refused'),
    ])
    const created = await gw.request('/v1/batches?name=logs', key, { method: 'POST', body: file })
    expect(created.status).toBe(201)
    batchId = ((await created.json()) as { id: string }).id
    await waitFor('the batch to finish', async () => {
      const batch = (await (await gw.request(`/v1/batches/${batchId}`, key)).json()) as {
        status: string
      }
      return FINAL_BATCH.includes(batch.status)
    })
    await (await gw.request(`/v1/batches/${batchId}/results`, key)).text()
    const live = await gw.request('/v1/chat/completions', key, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'sim/claude',
        messages: [{ role: 'user', content: LIVE_PROMPT }],
        max_tokens: 16,
      }),
    })
    expect(live.status).toBe(200)
    // A bad key, a sign-in through the dashboard's form: keys in headers and in bodies.
    expect((await gw.request('/v1/batches', `${key}x`)).status).toBe(401)
    // And a key pasted into a path by mistake.
    expect((await gw.request(`/v1/batches/${key}`, key)).status).toBe(404)
    const signIn = await fetch(`${gw.url}/dashboard/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ key }),
      redirect: 'manual',
    })
    expect(signIn.status).toBe(303)
    await gw.stop()
  })
  afterAll(async () => {
    await sim.stop()
    await claude.stop()
  })

  test('every line is one JSON object with time, level and event', () => {
    expect(lines.length).toBeGreaterThan(10)
    for (const line of lines) {
      expect(line.endsWith('\n')).toBe(true)
      expect(line.indexOf('\n')).toBe(line.length - 1)
      const event = JSON.parse(line) as Record<string, unknown>
      expect(typeof event.time).toBe('string')
      expect(['debug', 'info', 'warn', 'error']).toContain(event.level as string)
      expect(typeof event.event).toBe('string')
    }
  })

  test('requests, admissions, line outcomes and status changes are logged', () => {
    const events = lines.map((l) => JSON.parse(l) as Record<string, unknown>)
    const submit = events.find(
      (e) => e.event === 'http.request' && e.method === 'POST' && e.route === '/v1/batches',
    )
    expect(submit).toMatchObject({ level: 'info', status: 201, path: '/v1/batches' })
    expect(typeof submit!.duration_ms).toBe('number')
    expect(events.find((e) => e.event === 'batch.admitted')).toMatchObject({
      level: 'info',
      batch_id: batchId,
      lines: 3,
    })
    const outcomes = events.filter((e) => e.event === 'line.outcome' && e.batch_id === batchId)
    expect(outcomes.map((e) => e.status).sort()).toEqual(['failed', 'succeeded', 'succeeded'])
    expect(outcomes.find((e) => e.status === 'failed')).toMatchObject({
      level: 'debug',
      error_code: 'invalid_request',
    })
    // Each change says what the batch became, ending at completed.
    const changes = events.filter(
      (e) => e.event === 'batch.status_changed' && e.batch_id === batchId,
    )
    expect(changes.at(-1)).toMatchObject({ level: 'info', status: 'completed' })
    expect(
      events.some(
        (e) => e.event === 'http.request' && e.route === '/v1/chat/completions' && e.status === 200,
      ),
    ).toBe(true)
    expect(events.some((e) => e.event === 'http.request' && e.status === 401)).toBe(true)
    // A path with an id logs its route's pattern, not the id.
    expect(
      events.find((e) => e.event === 'http.request' && e.path === `/v1/batches/${batchId}`),
    ).toMatchObject({ method: 'GET', route: '/v1/batches/:id', status: 200 })
    expect(
      events.find((e) => e.event === 'http.request' && e.path === `/v1/batches/${batchId}/results`),
    ).toMatchObject({ route: '/v1/batches/:id/results' })
  })

  test('no line holds the API key, the admin token, the provider key or a prompt', () => {
    const text = lines.join('')
    for (const secret of [
      apiKey,
      apiKey.slice(3, 20),
      ADMIN_TOKEN,
      PROVIDER_KEY,
      PROMPT,
      'Zebediah',
      LIVE_PROMPT,
      'aubergine',
    ]) {
      expect(text).not.toContain(secret)
    }
  })
})

describe('LOG_LEVEL', () => {
  test('warn keeps info and debug events out', async () => {
    const lines: string[] = []
    const gw = await startTestGateway({ env: { LOG_LEVEL: 'warn' }, logLines: lines })
    expect((await fetch(`${gw.url}/v1/models`)).status).toBe(401)
    await gw.stop()
    expect(lines.filter((l) => /"level":"(info|debug)"/.test(l))).toEqual([])
  })

  test('info logs requests but not debug events; probes only at debug', async () => {
    const lines: string[] = []
    const gw = await startTestGateway({ env: { LOG_LEVEL: 'info' }, logLines: lines })
    await fetch(`${gw.url}/healthz`)
    await fetch(`${gw.url}/v1/models`)
    await gw.stop()
    const events = lines.map((l) => JSON.parse(l) as Record<string, unknown>)
    expect(events.some((e) => e.event === 'gateway.started')).toBe(true)
    expect(
      events.some((e) => e.event === 'http.request' && e.path === '/v1/models' && e.status === 401),
    ).toBe(true)
    expect(events.some((e) => e.path === '/healthz')).toBe(false)
    expect(events.some((e) => e.level === 'debug')).toBe(false)
  })
})

describe('a provider that refuses the gateway credentials', () => {
  test('is a warning at the default level, once a minute, naming the provider and never the key', async () => {
    const claude = await startSimulator({ latencyMs: 2, requireApiKey: 'sk-ant-test-secret' })
    const lines: string[] = []
    const gw = await startTestGateway({
      upstreams: { openai: 'http://127.0.0.1:9/v1', anthropic: claude.url },
      env: {
        LOG_LEVEL: 'info',
        MG_TEST_ANTHROPIC_KEY: 'sk-ant-revoked-key',
        MULTIGRID_POLL_MS: '50',
      },
      logLines: lines,
    })
    try {
      const { key } = await gw.newAccount('10')
      const call = () =>
        gw.request('/v1/chat/completions', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'sim/claude',
            messages: [{ role: 'user', content: 'hi' }],
            max_tokens: 8,
          }),
        })
      expect((await call()).status).toBe(502)
      expect((await call()).status).toBe(502)
      const warned = lines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((e) => e.event === 'upstream.credentials_refused')
      expect(warned).toHaveLength(1)
      expect(warned[0]).toMatchObject({ level: 'warn', provider: 'sim-anthropic' })
      expect(lines.join('\n')).not.toContain('sk-ant-revoked-key')
    } finally {
      await gw.stop()
      await claude.stop()
    }
  })
})
