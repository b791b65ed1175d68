/** Live endpoints through the same adapters, catalog, balance check and billing. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'

describe('live endpoints', () => {
  let sim: Simulator
  let claude: Simulator
  let gw: TestGateway
  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 2 })
    claude = await startSimulator({ latencyMs: 2, requireApiKey: 'sk-ant-test-secret' })
    gw = await startTestGateway({
      upstreams: { openai: `${sim.url}/v1`, anthropic: claude.url },
      env: { MULTIGRID_DISPATCH: '0' },
    })
  })
  afterAll(async () => {
    await gw.stop()
    await sim.stop()
    await claude.stop()
  })

  const post = (key: string, path: string, body: unknown) =>
    gw.request(path, key, {
      method: 'POST',
      body: JSON.stringify(body),
      headers: { 'content-type': 'application/json' },
    })
  const balance = async (id: string) =>
    ((await (await gw.admin(`/accounts/${id}`)).json()) as { balance_usd: string }).balance_usd

  test('chat completions: the upstream answer, billed from its usage', async () => {
    const { key, accountId } = await gw.newAccount('1')
    const response = await post(key, '/v1/chat/completions', {
      model: 'chat-small',
      messages: [{ role: 'user', content: 'hello there' }],
      max_tokens: 20,
    })
    expect(response.status).toBe(200)
    expect(response.headers.get('x-ratelimit-remaining')).not.toBeNull()
    const body = (await response.json()) as any
    expect(body.object).toBe('chat.completion')
    const cost = new Decimal(body.usage.prompt_tokens)
      .times('0.5')
      .plus(new Decimal(body.usage.completion_tokens).times('1.5'))
      .div(1e6)
    // Live charges are written in groups (every MULTIGRID_LIVE_CHARGE_INTERVAL_MS): write this one now.
    await gw.credit.flush()
    expect(new Decimal(await balance(accountId)).equals(new Decimal(1).minus(cost))).toBe(true)
  })

  test('chat completions stream as server-sent events, billed at the end', async () => {
    const { key, accountId } = await gw.newAccount('1')
    const response = await post(key, '/v1/chat/completions', {
      model: 'sim/claude',
      stream: true,
      messages: [{ role: 'user', content: 'stream to me' }],
      max_tokens: 30,
    })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('text/event-stream')
    const events = (await response.text()).split('\n\n').filter(Boolean)
    expect(events.at(-1)).toBe('data: [DONE]')
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)))
    expect(chunks[0].object).toBe('chat.completion.chunk')
    const text = chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('')
    expect(text.length).toBeGreaterThan(0)
    await Bun.sleep(50)
    await gw.credit.flush()
    expect(new Decimal(await balance(accountId)).lessThan(1)).toBe(true)
  })

  /** The chunks of a streamed call, [DONE] checked and dropped. */
  const streamed = async (key: string, body: Record<string, unknown>) => {
    const response = await post(key, '/v1/chat/completions', { ...body, stream: true })
    expect(response.status).toBe(200)
    const events = (await response.text()).split('\n\n').filter(Boolean)
    expect(events.at(-1)).toBe('data: [DONE]')
    return events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)))
  }

  for (const [model, input, output] of [
    ['sim/chat', '0.50', '1.50'],
    ['sim/claude', '3', '15'],
  ] as const) {
    test(`${model}: a stream ends with a usage-only chunk only when include_usage asks; billed from usage either way`, async () => {
      const body = {
        model,
        messages: [{ role: 'user', content: 'stream the same answer twice' }],
        max_tokens: 40,
      }
      const asked = await gw.newAccount('1')
      const withUsage = await streamed(asked.key, {
        ...body,
        stream_options: { include_usage: true },
      })
      const last = withUsage.at(-1)!
      expect(last.choices).toEqual([])
      const usage = last.usage as { prompt_tokens: number; completion_tokens: number }
      expect(usage.completion_tokens).toBeGreaterThan(0)

      const plain = await gw.newAccount('1')
      const without = await streamed(plain.key, body)
      // Every chunk has a choice to read (clients read chunk.choices[0]); none carries usage.
      expect(without.length).toBeGreaterThan(0)
      for (const chunk of without) {
        expect(chunk.choices.length).toBeGreaterThan(0)
        expect('usage' in chunk).toBe(false)
      }
      const also = await streamed(plain.key, { ...body, stream_options: { include_usage: false } })
      expect(also.some((chunk) => chunk.choices.length === 0 || 'usage' in chunk)).toBe(false)

      // Both accounts charged from the upstream's usage: the same answer, the same price.
      const cost = new Decimal(usage.prompt_tokens)
        .times(input)
        .plus(new Decimal(usage.completion_tokens).times(output))
        .div(1e6)
      await Bun.sleep(50)
      await gw.credit.flush()
      expect(new Decimal(1).minus(await balance(asked.accountId)).equals(cost)).toBe(true)
      expect(new Decimal(1).minus(await balance(plain.accountId)).equals(cost.times(2))).toBe(true)
    })
  }

  test('embeddings, and the model list', async () => {
    const { key } = await gw.newAccount('1')
    const response = await post(key, '/v1/embeddings', {
      model: 'sim/embed',
      input: ['a', 'b', 'c'],
    })
    expect(response.status).toBe(200)
    expect(((await response.json()) as any).data).toHaveLength(3)
    const models = (await (await gw.request('/v1/models', key)).json()) as {
      data: { id: string }[]
    }
    expect(models.data.map((m) => m.id)).toContain('sim/chat')
    expect(models.data.map((m) => m.id)).not.toContain('paid/chat') // no key: not offered
    // One model as the list has it: its id URL-encoded, as the SDKs send it, or as it is.
    const listed = models.data.find((m) => m.id === 'sim/chat')
    for (const path of [
      '/v1/models/sim%2Fchat',
      '/v1/models/sim/chat',
      '/openai/v1/models/sim%2Fchat',
    ]) {
      const one = await gw.request(path, key)
      expect(one.status).toBe(200)
      expect(await one.json()).toEqual(listed)
    }
    for (const id of ['no%2Fsuch', 'paid%2Fchat', 'sim/%zz']) {
      const missing = await gw.request(`/v1/models/${id}`, key)
      expect(missing.status).toBe(404)
      expect(((await missing.json()) as any).error.code).toBe('model_not_found')
    }
    expect((await gw.request('/v1/models/sim%2Fchat', null)).status).toBe(401)
    // A call naming a model there is not: OpenAI's 404 model_not_found, on either endpoint.
    for (const [path, body] of [
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }],
      ['/v1/embeddings', { input: 'hi' }],
    ] as const) {
      const call = await gw.request(path, key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'no/such-model', ...body }),
      })
      expect(call.status).toBe(404)
      expect(((await call.json()) as any).error).toMatchObject({
        code: 'model_not_found',
        param: 'model',
        message: expect.stringMatching(/^model names an unknown model, "no\/such-model"; use /),
      })
    }
  })

  test('a body that is not JSON is a 400 saying so; a form upload a 415 saying to send JSON', async () => {
    const { key } = await gw.newAccount('1')
    const broken = await gw.request('/v1/chat/completions', key, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"model": "sim/chat",}',
    })
    expect(broken.status).toBe(400)
    expect(((await broken.json()) as any).error.message).toContain('a trailing comma')
    const form = new FormData()
    form.set('model', 'sim/chat')
    form.set('messages', '[{"role": "user", "content": "hi"}]')
    const upload = await gw.request('/v1/chat/completions', key, { method: 'POST', body: form })
    expect(upload.status).toBe(415)
    expect(((await upload.json()) as any).error).toMatchObject({
      code: 'unsupported_media_type',
      param: 'content-type',
      message: expect.stringContaining('Content-Type: application/json'),
    })
  })

  test('the balance check uses the ceiling arithmetic; bad requests and scopes are refused', async () => {
    const { key, accountId } = await gw.newAccount('0.000010')
    // (12 × 0.5 + 4096 × 1.5) / 1e6 > 0.00001
    const poor = await post(key, '/v1/chat/completions', {
      model: 'sim/chat',
      messages: [{ role: 'user', content: 'hello' }],
    })
    expect(poor.status).toBe(402)
    const poorError = ((await poor.json()) as any).error
    expect(poorError.code).toBe('insufficient_quota')
    // Most of that ceiling is the model's own output limit, assumed for want of max_tokens.
    expect(poorError.message).toEndWith(
      "; the request sets no max_tokens, so it is priced at the model's limit of 4096 output tokens: set max_tokens to what the answer needs, or add credit",
    )
    // The Responses API names its limit max_output_tokens.
    const poorResponses = await post(key, '/v1/responses', { model: 'sim/chat', input: 'hello' })
    expect(poorResponses.status).toBe(402)
    expect(((await poorResponses.json()) as any).error.message).toContain(
      'the request sets no max_output_tokens, so it is priced',
    )
    // (89 × 0.5 + 8 × 1.5) / 1e6 = 0.0000565 (the prompt's bound is the body's bytes and more):
    // shown as a batch's ceiling is, rounded up to a millionth.
    const odd = await post(key, '/v1/chat/completions', {
      model: 'sim/chat',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 8,
    })
    expect(odd.status).toBe(402)
    expect(((await odd.json()) as any).error).toMatchObject({
      cost_ceiling_usd: '0.000057',
      available_usd: '0.000010',
      message: expect.stringMatching(/; add credit or lower max_tokens$/),
    })
    const bad = await post(key, '/v1/chat/completions', {
      model: 'sim/chat',
      messages: [],
      max_tokens: 5,
    })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as any).error.param).toBe('messages')
    // A tier billed at other rates than the offering's list prices: the lane sets it.
    const { key: richKey } = await gw.newAccount('1')
    const priority = await post(richKey, '/v1/chat/completions', {
      model: 'sim/chat',
      messages: [{ role: 'user', content: 'hello' }],
      max_tokens: 5,
      service_tier: 'priority',
    })
    expect(priority.status).toBe(400)
    expect(((await priority.json()) as any).error.param).toBe('service_tier')
    const batchesOnly = (await (
      await gw.admin(`/accounts/${accountId}/keys`, { body: { scopes: ['batches'] } })
    ).json()) as { key: string }
    expect(
      (await post(batchesOnly.key, '/v1/embeddings', { model: 'sim/embed', input: 'x' })).status,
    ).toBe(403)
  })
})
