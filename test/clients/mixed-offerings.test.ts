/**
 * A model whose offerings speak different APIs (SPEC §18, docs/clients/responses.md,
 * docs/clients/anthropic-sdk.md): a Responses request goes as it came to offerings with
 * `responses_api` and as chat completions to the others, a Messages request as it came to
 * Anthropic offerings, decided per offering, also when a call falls back from one kind to the
 * other. The client gets its own API's answer either way, billed at the answering offering's rates.
 */
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import OpenAI from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { freePort } from '../helpers/process-gateway.ts'
import { nativeClient } from '../helpers/native-client.ts'

let sim: Simulator
let gw: TestGateway
let key: string
let openai: OpenAI
let anthropic: Anthropic

interface Row {
  custom_id: string
  cost_usd: string
  response: { body: { object: string; usage: { input_tokens: number; output_tokens: number } } }
}
const native = nativeClient<{ id: string; status: string }, Row>(
  () => gw,
  () => key,
)

/** The chat-only offering's rates, and the Responses offering's. */
const CHAT_RATES = { input: '0.5', output: '1.5' }
const RESPONSES_RATES = { input: '1', output: '2' }

const offering = (provider: string, rates: { input: string; output: string }) => ({
  provider,
  upstream_model: `${provider}-model`,
  input_usd_per_mtok: rates.input,
  output_usd_per_mtok: rates.output,
})

const model = (id: string, offerings: unknown[]) => ({
  id,
  endpoints: ['chat'],
  context_tokens: 32000,
  max_output_tokens: 4096,
  offerings,
})

beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1, keepBodies: 50 })
  const catalog = testCatalog({ openai: `${sim.url}/v1`, anthropic: sim.url }) as {
    providers: Record<string, unknown>
    models: unknown[]
  }
  // Nothing listens here: a call to it is refused, and falls back.
  const dead = `http://127.0.0.1:${freePort()}`
  catalog.providers['sim-responses'] = {
    kind: 'openai',
    base_url: `${sim.url}/v1`,
    max_concurrency: 8,
    responses_api: true,
  }
  catalog.providers['dead-responses'] = {
    kind: 'openai',
    base_url: `${dead}/v1`,
    max_concurrency: 8,
    responses_api: true,
  }
  catalog.providers['dead-anthropic'] = {
    kind: 'anthropic',
    base_url: dead,
    api_key_env: 'MG_TEST_ANTHROPIC_KEY',
    max_concurrency: 8,
  }
  catalog.models.push(
    model('mix/responses-first', [
      offering('sim-responses', RESPONSES_RATES),
      offering('sim', CHAT_RATES),
    ]),
    model('mix/chat-first', [
      offering('sim', CHAT_RATES),
      offering('sim-responses', RESPONSES_RATES),
    ]),
    model('mix/dead-responses', [
      offering('dead-responses', RESPONSES_RATES),
      offering('sim', CHAT_RATES),
    ]),
    model('mix/dead-anthropic', [
      offering('dead-anthropic', RESPONSES_RATES),
      offering('sim', CHAT_RATES),
    ]),
  )
  gw = await startTestGateway({ catalog, env: { MULTIGRID_POLL_MS: '50' } })
  const account = await gw.newAccount('10')
  key = account.key
  openai = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 })
  anthropic = new Anthropic({ baseURL: `${gw.url}/anthropic`, apiKey: key, maxRetries: 0 })
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

/** What the simulator was sent since `from`: each request's path and body. */
const sentSince = (from: number) =>
  sim
    .received()
    .slice(from)
    .map((request) => ({
      path: request.path,
      body: JSON.parse(request.text) as Record<string, unknown>,
    }))

/** A JSON POST to the gateway with the account's key. */
const postJson = (path: string, body: unknown) =>
  gw.request(path, key, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })

/** Cost in USD of `usage` at `rates` (per million tokens). */
const costAt = (
  usage: { input_tokens: number; output_tokens: number },
  rates: { input: string; output: string },
) =>
  new Decimal(usage.input_tokens)
    .times(rates.input)
    .plus(new Decimal(usage.output_tokens).times(rates.output))
    .div(1_000_000)

describe('a Responses call', () => {
  /** A Responses call through the openai package, and what the simulator was sent for it. */
  async function respond(model: string, extra: { truncation?: 'auto' } = {}) {
    const from = sim.received().length
    const response = await openai.responses.create({
      model,
      input: 'Say hello.',
      max_output_tokens: 32,
      ...extra,
    })
    return { response, sent: sentSince(from) }
  }

  test('goes as it came to a first offering with responses_api', async () => {
    const { response, sent } = await respond('mix/responses-first')
    expect(sent.map((request) => request.path)).toEqual(['/v1/responses'])
    expect(sent[0].body.store).toBe(false)
    expect(response.id).toStartWith('resp_sim')
  })

  test('goes as chat completions to a chat-only first offering, answered as a Response', async () => {
    const { response, sent } = await respond('mix/chat-first')
    expect(sent.map((request) => request.path)).toEqual(['/v1/chat/completions'])
    expect(sent[0].body.messages).toEqual([{ role: 'user', content: 'Say hello.' }])
    expect(response.object).toBe('response')
    expect(response.output_text.length).toBeGreaterThan(0)
  })

  test('falls back from an offering with responses_api to a chat-only one, translated there', async () => {
    const { response, sent } = await respond('mix/dead-responses')
    // The refused offering never reached the simulator; the fallback got chat completions.
    expect(sent.map((request) => request.path)).toEqual(['/v1/chat/completions'])
    expect(response.object).toBe('response')
    expect(response.output_text.length).toBeGreaterThan(0)
    expect(response.usage!.output_tokens).toBeGreaterThan(0)
  })

  test('streamed, falls back the same way and sends the Responses events', async () => {
    const from = sim.received().length
    const stream = openai.responses.stream({ model: 'mix/dead-responses', input: 'Say hello.' })
    const types: string[] = []
    for await (const event of stream) types.push(event.type)
    expect(sentSince(from).map((request) => request.path)).toEqual(['/v1/chat/completions'])
    expect(types[0]).toBe('response.created')
    expect(types).toContain('response.output_text.delta')
    expect(types.at(-1)).toBe('response.completed')
  })

  test('with a field outside the translated subset goes only to the offering with responses_api', async () => {
    const { response, sent } = await respond('mix/chat-first', { truncation: 'auto' })
    expect(sent.map((request) => request.path)).toEqual(['/v1/responses'])
    expect(sent[0].body.truncation).toBe('auto')
    expect(response.id).toStartWith('resp_sim')
  })

  test('routed by the provider object to the offering with responses_api, goes as it came', async () => {
    const from = sim.received().length
    const answer = await postJson('/v1/responses', {
      model: 'mix/chat-first',
      input: 'Say hello.',
      provider: { only: ['sim-responses'] },
    })
    expect(answer.status).toBe(200)
    const sent = sentSince(from)
    expect(sent.map((request) => request.path)).toEqual(['/v1/responses'])
    // The routing object is the gateway's: never sent upstream.
    expect(sent[0].body.provider).toBeUndefined()
    expect(((await answer.json()) as { id: string }).id).toStartWith('resp_sim')
  })

  test('with such a field and a routing that leaves no offering with responses_api is a 400 naming it', async () => {
    const from = sim.received().length
    const answer = await postJson('/v1/responses', {
      model: 'mix/chat-first',
      input: 'Say hello.',
      truncation: 'auto',
      provider: { only: ['sim'] },
    })
    expect(answer.status).toBe(400)
    const { error } = (await answer.json()) as { error: { param: string } }
    expect(error.param).toBe('truncation')
    expect(sentSince(from)).toEqual([])
  })

  test('with such a field and no offering with responses_api is a 400 naming it, sent nowhere', async () => {
    const from = sim.received().length
    const answer = await postJson('/v1/responses', {
      model: 'sim/chat',
      input: 'Say hello.',
      truncation: 'auto',
    })
    expect(answer.status).toBe(400)
    const { error } = (await answer.json()) as { error: { param: string; message: string } }
    expect(error.param).toBe('truncation')
    expect(sentSince(from)).toEqual([])
  })
})

describe('Responses batch lines', () => {
  test('go per offering, each answer a Response billed at its offering rates', async () => {
    const from = sim.received().length
    const lines = [
      { custom_id: 'plain', input: 'Say hello.' },
      { custom_id: 'truncated', input: 'Say hello again.', truncation: 'auto' },
    ].map(({ custom_id, ...body }) => ({
      custom_id,
      method: 'POST',
      url: '/v1/responses',
      body: { model: 'mix/chat-first', max_output_tokens: 32, ...body },
    }))
    const batch = await native.submit(lines.map((line) => JSON.stringify(line)).join('\n'))
    expect((await native.finished(batch.id)).status).toBe('completed')
    const sent = sentSince(from)
    expect(sent.map((request) => request.path).sort()).toEqual([
      '/v1/chat/completions',
      '/v1/responses',
    ])
    expect(sent.find((request) => request.path === '/v1/responses')!.body.truncation).toBe('auto')
    const rows = await native.results(batch.id)
    expect(rows.map((row) => row.custom_id)).toEqual(['plain', 'truncated'])
    for (const row of rows) expect(row.response.body.object).toBe('response')
    const [plain, truncated] = rows
    expect(new Decimal(plain.cost_usd).equals(costAt(plain.response.body.usage, CHAT_RATES))).toBe(
      true,
    )
    expect(
      new Decimal(truncated.cost_usd).equals(
        costAt(truncated.response.body.usage, RESPONSES_RATES),
      ),
    ).toBe(true)
  })

  /** The issues of a one-line file of a Responses line with `body`: refused whole, with a 400. */
  async function issuesOf(body: Record<string, unknown>) {
    const line = { custom_id: 'only', method: 'POST', url: '/v1/responses', body }
    const submitted = await gw.request('/v1/batches', key, {
      method: 'POST',
      headers: { 'content-type': 'application/jsonl' },
      body: JSON.stringify(line),
    })
    expect(submitted.status).toBe(400)
    return ((await submitted.json()) as { issues: { line: number; path: string }[] }).issues
  }

  test('outside the subset with a routing that leaves no offering with responses_api are refused at once', async () => {
    const issues = await issuesOf({
      model: 'mix/chat-first',
      input: 'Say hello.',
      truncation: 'auto',
      provider: { only: ['sim'] },
    })
    expect(issues).toEqual([expect.objectContaining({ line: 1, path: 'body.truncation' })])
  })

  test('outside the subset for a model with no offering with responses_api are refused at once', async () => {
    const issues = await issuesOf({ model: 'sim/chat', input: 'Say hello.', truncation: 'auto' })
    expect(issues).toEqual([expect.objectContaining({ line: 1, path: 'body.truncation' })])
  })
})

describe('a Messages call', () => {
  const ask = (model: string, extra: Record<string, unknown> = {}) => ({
    model,
    max_tokens: 32,
    messages: [{ role: 'user' as const, content: 'Say hello.' }],
    ...extra,
  })

  test('falls back from an Anthropic offering to a chat-only one, answered as a message', async () => {
    const from = sim.received().length
    const message = await anthropic.messages.create(ask('mix/dead-anthropic'))
    expect(sentSince(from).map((request) => request.path)).toEqual(['/v1/chat/completions'])
    expect(message.type).toBe('message')
    // Translated, the answer names the caller's model.
    expect(message.model).toBe('mix/dead-anthropic')
    expect(message.content[0].type).toBe('text')
  })

  test('streamed, falls back the same way and sends Anthropic events', async () => {
    const from = sim.received().length
    const stream = anthropic.messages.stream(ask('mix/dead-anthropic'))
    const types: string[] = []
    for await (const event of stream) types.push(event.type)
    expect(sentSince(from).map((request) => request.path)).toEqual(['/v1/chat/completions'])
    expect(types[0]).toBe('message_start')
    expect(types.at(-1)).toBe('message_stop')
    expect((await stream.finalMessage()).usage.output_tokens).toBeGreaterThan(0)
  })

  test('with a field outside the translated subset goes as it came to the Anthropic offering', async () => {
    // sim/multi: a chat-only offering first, an Anthropic one second.
    const from = sim.received().length
    const message = await anthropic.messages.create(ask('sim/multi', { top_k: 5 }))
    const sent = sentSince(from)
    expect(sent.map((request) => request.path)).toEqual(['/v1/messages'])
    expect(sent[0].body.top_k).toBe(5)
    expect(message.model).toBe('claude-multi')
  })

  test('with such a field and a routing that leaves no Anthropic offering is a 400 naming it', async () => {
    const from = sim.received().length
    const answer = await postJson(
      '/anthropic/v1/messages',
      ask('sim/multi', { top_k: 5, provider: { only: ['sim'] } }),
    )
    expect(answer.status).toBe(400)
    const body = (await answer.json()) as { type: string; error: { type: string; message: string } }
    expect(body.type).toBe('error')
    expect(body.error.message).toContain('top_k')
    expect(sentSince(from)).toEqual([])
  })

  test('without one goes to the first offering as chat completions', async () => {
    const from = sim.received().length
    const message = await anthropic.messages.create(ask('sim/multi'))
    expect(sentSince(from).map((request) => request.path)).toEqual(['/v1/chat/completions'])
    expect(message.model).toBe('sim/multi')
  })

  test("count_tokens gives the Anthropic offering's own count for a mixed model", async () => {
    const messages = [{ role: 'user' as const, content: 'Say hello to the whole team, please.' }]
    const counted = await anthropic.messages.countTokens({ model: 'sim/multi', messages })
    // What the Anthropic offering reports as input for the same prompt (top_k keeps it there).
    const params = { model: 'sim/multi', messages, max_tokens: 16, top_k: 5 }
    const answer = await anthropic.messages.create(params)
    expect(answer.model).toBe('claude-multi')
    expect(counted.input_tokens).toBe(answer.usage.input_tokens)
    // A model with no Anthropic offering gets the gateway's pessimistic bound, never below it.
    const bound = await anthropic.messages.countTokens({ model: 'sim/chat', messages })
    expect(bound.input_tokens).toBeGreaterThan(counted.input_tokens)
  })
})
