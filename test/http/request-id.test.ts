/**
 * Every answer carries its request's id (src/http/request-id.ts): `x-request-id`, and under
 * /anthropic also `request-id`, where the two SDKs read it (`_request_id`); the same id is on the
 * request's `http.request` log line. A plain id the caller sent is kept; any other is replaced.
 */
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'

let sim: Simulator
let gw: TestGateway
let key = ''
const logLines: string[] = []

beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1 })
  gw = await startTestGateway({
    upstreams: { openai: `${sim.url}/v1`, anthropic: sim.url },
    env: { LOG_LEVEL: 'info' },
    logLines,
  })
  key = (await gw.newAccount('10')).key
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

const idOf = (response: Response) => response.headers.get('x-request-id')
/** An id the gateway made: its process's 12 hex digits, then a counter. */
const OWN_ID = /^req_[0-9a-f]{12}[0-9a-z]+$/

test('answers of every kind carry an id of their own', async () => {
  const answers = [
    await gw.request('/v1/models', key),
    await gw.request('/v1/batches', key, { method: 'POST', body: jsonl([chatLine('a', 'hi')]) }),
    await gw.request('/v1/batches', `${key}x`),
    await gw.request('/v1/nowhere', key),
    await gw.request('/v1/models', key, { headers: { 'x-filler': 'f'.repeat(20_000) } }),
    await gw.request('/healthz', key),
  ]
  expect(answers.map((answer) => answer.status)).toEqual([200, 201, 401, 404, 431, 200])
  const ids = answers.map(idOf)
  for (const id of ids) expect(id).toMatch(OWN_ID)
  expect(new Set(ids).size).toBe(ids.length)
})

test('a plain id the caller sent is kept; another is replaced', async () => {
  const kept = await gw.request('/v1/models', key, { headers: { 'x-request-id': 'lb-7f3a:19.2' } })
  expect(idOf(kept)).toBe('lb-7f3a:19.2')
  for (const sent of ['two words', 'x'.repeat(129), 'a"b']) {
    const replaced = await gw.request('/v1/models', key, { headers: { 'x-request-id': sent } })
    expect(idOf(replaced)).toMatch(OWN_ID)
  }
})

test("the SDKs read the id: openai's x-request-id, Anthropic's request-id", async () => {
  const openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 })
  const completion = await openai.chat.completions.create({
    model: 'sim/chat',
    messages: [{ role: 'user', content: 'hi' }],
    max_tokens: 8,
  })
  // The gateway's own id, not the upstream's it called (the simulator's are req_sim…).
  expect(completion._request_id).toMatch(OWN_ID)

  const anthropic = new Anthropic({ baseURL: `${gw.url}/anthropic`, apiKey: key, maxRetries: 0 })
  const message = await anthropic.messages.create({
    model: 'sim/claude',
    max_tokens: 8,
    messages: [{ role: 'user', content: 'hi' }],
  })
  expect(message._request_id).toMatch(OWN_ID)
  const raw = await gw.request('/anthropic/v1/models', key)
  expect(raw.headers.get('request-id')).toBe(idOf(raw))
  // Elsewhere only OpenAI's header name.
  expect((await gw.request('/v1/models', key)).headers.get('request-id')).toBeNull()
})

test('the http.request log line names the id its answer carried', async () => {
  const answer = await gw.request('/v1/batches?limit=1', key)
  const id = idOf(answer)!
  const logged = () =>
    logLines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((entry) => entry.event === 'http.request' && entry.request_id === id)
  for (let i = 0; i < 50 && !logged(); i++) await Bun.sleep(20)
  expect(logged()).toMatchObject({ method: 'GET', route: '/v1/batches', status: 200 })
})
