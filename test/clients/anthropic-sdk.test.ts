/**
 * The Anthropic SDK, unchanged, against a started gateway (docs/clients/anthropic-sdk.md): Messages (streaming and
 * not) for an Anthropic offering and translated for an OpenAI-compatible one, count_tokens, and
 * Message Batches from create to delete, their results in Anthropic's shape and submitted order.
 */
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { STORES, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { messageBatchEnded } from '../helpers/message-batches.ts'

/** The error object of a 400 the SDK threw, its type checked. */
function badRequestOf(error: unknown): { param: string; message: string } {
  expect(error).toBeInstanceOf(Anthropic.BadRequestError)
  return (error as { error: { error: { param: string; message: string } } }).error.error
}

for (const store of STORES) describe(store, () => suite(store))

function suite(store: (typeof STORES)[number]) {
  let sim: Simulator
  let gw: TestGateway
  let client: Anthropic
  let key: string
  let accountId: string
  /** An account whose credit covers no call: its 402s tell a call's ceiling. */
  let poorKey: string

  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 1, keepBodies: 500 })
    gw = await startTestGateway({
      store,
      upstreams: { openai: `${sim.url}/v1`, anthropic: sim.url },
      // A low line limit, so that a create over it is a small body.
      env: { MULTIGRID_POLL_MS: '50', MULTIGRID_MAX_LINES: '100' },
    })
    const account = await gw.newAccount('10')
    key = account.key
    accountId = account.accountId
    poorKey = (await gw.newAccount('0.000001')).key
    client = new Anthropic({ baseURL: `${gw.url}/anthropic`, apiKey: account.key, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw.stop()
    await sim.stop()
  })

  const ask = (model: string) => ({
    model,
    max_tokens: 64,
    system: 'Answer briefly.',
    messages: [{ role: 'user' as const, content: 'Say hello.' }],
  })

  const tools = [
    {
      name: 'get_weather',
      description: 'The weather in a city.',
      input_schema: {
        type: 'object' as const,
        properties: { city: { type: 'string' } },
        required: ['city'],
      },
    },
  ]

  /** A native submit of a one-line file. */
  const submitNative = (line: Record<string, unknown>) =>
    gw.request('/v1/batches', key, {
      method: 'POST',
      headers: { 'content-type': 'application/jsonl' },
      body: JSON.stringify(line),
    })

  describe('messages', () => {
    for (const model of ['sim/claude', 'sim/chat']) {
      test(`create answers an Anthropic message (${model})`, async () => {
        const message = await client.messages.create(ask(model))
        expect(message.type).toBe('message')
        expect(message.role).toBe('assistant')
        expect(message.id).toStartWith('msg_')
        // Passed through, Anthropic's answer names the upstream's model; translated, the caller's.
        expect(message.model).toBe(model === 'sim/claude' ? 'claude-sim' : model)
        expect(message.content[0].type).toBe('text')
        expect((message.content[0] as { text: string }).text.length).toBeGreaterThan(0)
        expect(['end_turn', 'max_tokens']).toContain(message.stop_reason!)
        expect(message.usage.input_tokens).toBeGreaterThan(0)
        expect(message.usage.output_tokens).toBeGreaterThan(0)
      })

      test(`stream sends Anthropic's events in order (${model})`, async () => {
        const stream = client.messages.stream(ask(model))
        const types: string[] = []
        stream.on('streamEvent', (event) => types.push(event.type))
        const message = await stream.finalMessage()
        expect(types[0]).toBe('message_start')
        expect(types.slice(-2)).toEqual(['message_delta', 'message_stop'])
        expect(types).toContain('content_block_start')
        expect(types).toContain('content_block_delta')
        expect(types.indexOf('content_block_stop')).toBeGreaterThan(
          types.indexOf('content_block_delta'),
        )
        const text = (message.content[0] as { text: string }).text
        expect(text.length).toBeGreaterThan(0)
        expect(message.usage.output_tokens).toBeGreaterThan(0)
      })
    }

    test('stream as a string is a 400 naming it, passed through or not, never an answer of the other form', async () => {
      for (const model of ['sim/claude', 'sim/chat']) {
        const error = await client.messages
          .create({ ...ask(model), stream: 'true' } as never)
          .catch((e: unknown) => e)
        const body = badRequestOf(error)
        expect(body.param).toBe('stream')
        expect(body.message).toContain('write stream as true, without quotes')
      }
    })

    test('more stop_sequences than chat takes go to Anthropic as sent; translated, a 400 naming stop_sequences', async () => {
      const stops = ['one', 'two', 'three', 'four', 'five']
      const message = await client.messages.create({ ...ask('sim/claude'), stop_sequences: stops })
      expect(message.type).toBe('message')
      expect(JSON.parse(sim.received().at(-1)!.text).stop_sequences).toEqual(stops)
      const before = sim.received().length
      const error = await client.messages
        .create({ ...ask('sim/chat'), stop_sequences: stops })
        .catch((e: unknown) => e)
      const body = badRequestOf(error)
      expect(body.param).toBe('stop_sequences')
      expect(body.message).toContain('send at most 4')
      expect(sim.received().length).toBe(before)
    })

    test('a tool_result holding an image goes to Anthropic as sent; translated, a 400 naming the block', async () => {
      const png =
        'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=='
      const screenshot = (model: string) =>
        client.messages.create({
          ...ask(model),
          tools,
          messages: [
            { role: 'user', content: 'What does the screen show?' },
            {
              role: 'assistant',
              content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} }],
            },
            {
              role: 'user',
              content: [
                {
                  type: 'tool_result',
                  tool_use_id: 'toolu_1',
                  content: [
                    { type: 'text', text: 'the screen:' },
                    {
                      type: 'image',
                      source: { type: 'base64', media_type: 'image/png', data: png },
                    },
                  ],
                },
              ],
            },
          ],
        })
      const message = await screenshot('sim/claude')
      expect(message.type).toBe('message')
      const sent = JSON.parse(sim.received().at(-1)!.text)
      expect(sent.messages[2].content[0].content[1].source.data).toBe(png)
      const error = await screenshot('sim/chat').catch((e: unknown) => e)
      const body = badRequestOf(error)
      expect(body.param).toBe('messages[2].content[0].content[1]')
    })

    test("an image from Anthropic's Files API goes to Anthropic as sent, held as an image; translated, a 400 naming its source", async () => {
      const ofImage = (model: string, source: Record<string, unknown>) => ({
        ...ask(model),
        messages: [
          {
            role: 'user' as const,
            content: [
              { type: 'image', source },
              { type: 'text', text: 'What is this?' },
            ],
          },
        ],
      })
      const file = { type: 'file', file_id: 'file_011CNha8iCJcU1wXNR6q4V8w' }
      const message = await client.messages.create(ofImage('sim/claude', file) as never)
      expect(message.type).toBe('message')
      expect(JSON.parse(sim.received().at(-1)!.text).messages[0].content[0].source).toEqual(file)
      // Held as an image, as one by URL is: the same ceiling.
      const ceiling = async (source: Record<string, unknown>) => {
        const response = await gw.request('/anthropic/v1/messages', poorKey, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(ofImage('sim/claude', source)),
        })
        expect(response.status).toBe(402)
        return ((await response.json()) as { error: { cost_ceiling_usd: string } }).error
          .cost_ceiling_usd
      }
      expect(await ceiling(file)).toBe(await ceiling({ type: 'url', url: 'https://x.test/a.png' }))
      const error = await client.messages
        .create(ofImage('sim/chat', file) as never)
        .catch((e: unknown) => e)
      const body = badRequestOf(error)
      expect(body.param).toBe('messages[0].content[0].source')
      expect(body.message).toContain('send a base64 or url source')
    })

    test('a translated model counts the cache the same streamed or not: input_tokens the uncached part, the cache fields beside it', async () => {
      const cachedAsk = {
        ...ask('sim/chat'),
        messages: [
          {
            role: 'user' as const,
            content: '[sim:cache read=200 write=100] ' + 'word '.repeat(450),
          },
        ],
      }
      const whole = await client.messages.create(cachedAsk)
      const streamed = await client.messages.stream(cachedAsk).finalMessage()
      expect(whole.usage.cache_read_input_tokens).toBe(200)
      expect(whole.usage.cache_creation_input_tokens).toBe(100)
      expect(streamed.usage).toMatchObject({
        input_tokens: whole.usage.input_tokens,
        output_tokens: whole.usage.output_tokens,
        cache_read_input_tokens: 200,
        cache_creation_input_tokens: 100,
      })
    })

    test('a Claude model gets the request as it came: fields outside the subset pass', async () => {
      const message = await client.messages.create({ ...ask('sim/claude'), top_k: 3 } as never)
      expect(message.type).toBe('message')
      const sent = sim.received().at(-1)!
      expect(sent.path).toBe('/v1/messages')
      expect(JSON.parse(sent.text)).toMatchObject({
        model: 'claude-sim',
        top_k: 3,
        system: 'Answer briefly.',
      })
    })

    test("the caller's anthropic-beta header goes on to Anthropic offerings, streamed or not, and to no other", async () => {
      const betas = 'output-128k-2025-02-19, context-1m-2025-08-07'
      const withBetas = { headers: { 'anthropic-beta': betas } }
      await client.messages.create(ask('sim/claude'), withBetas)
      const sent = betas.replace(', ', ',')
      expect(sim.received().at(-1)).toMatchObject({ path: '/v1/messages', anthropicBeta: sent })
      await client.messages.stream(ask('sim/claude'), withBetas).finalMessage()
      expect(sim.received().at(-1)).toMatchObject({ path: '/v1/messages', anthropicBeta: sent })
      // Translated for an OpenAI-compatible offering: the header is Anthropic's alone.
      await client.messages.create(ask('sim/chat'), withBetas)
      expect(sim.received().at(-1)!.path).toBe('/v1/chat/completions')
      expect(sim.received().at(-1)!.anthropicBeta).toBeUndefined()
      // Without one, none is sent.
      await client.messages.create(ask('sim/claude'))
      expect(sim.received().at(-1)!.anthropicBeta).toBeUndefined()
      // Empty names are left out; a header of nothing but them sends none.
      await client.messages.create(ask('sim/claude'), { headers: { 'anthropic-beta': 'a, ,b,' } })
      expect(sim.received().at(-1)!.anthropicBeta).toBe('a,b')
      await client.messages.create(ask('sim/claude'), { headers: { 'anthropic-beta': ' , ' } })
      expect(sim.received().at(-1)!.anthropicBeta).toBeUndefined()
      const long = await client.messages
        .create(ask('sim/claude'), { headers: { 'anthropic-beta': 'x'.repeat(1025) } })
        .catch((e: unknown) => e)
      expect(long).toBeInstanceOf(Anthropic.BadRequestError)
    })

    test('a Bearer key works as x-api-key does, anthropic-version or not', async () => {
      const response = await fetch(`${gw.url}/anthropic/v1/messages`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(ask('sim/chat')),
      })
      expect(response.status).toBe(200)
      expect(((await response.json()) as { type: string }).type).toBe('message')
    })

    test("countTokens: Anthropic's own count where only Anthropic serves the model, else the gateway's bound", async () => {
      const messages = [{ role: 'user' as const, content: 'Say hello to the whole team, please.' }]
      const counted = await client.messages.countTokens({ model: 'sim/claude', messages })
      // Anthropic's count is what its answer to the same prompt reports as input.
      const answer = await client.messages.create({ model: 'sim/claude', messages, max_tokens: 16 })
      expect(counted.input_tokens).toBe(answer.usage.input_tokens)
      // A translated model gets the gateway's pessimistic bound: never below the real count.
      const bound = await client.messages.countTokens({ model: 'sim/chat', messages })
      expect(bound.input_tokens).toBeGreaterThan(counted.input_tokens)
    })

    test("countTokens passes a Claude model's own fields through, as create does", async () => {
      const counted = await client.messages.countTokens({
        model: 'sim/claude',
        messages: [{ role: 'user', content: 'Think first, then say hello.' }],
        thinking: { type: 'enabled', budget_tokens: 1024 },
      })
      // Anthropic's count: the translation's subset (which has no thinking) is not asked for.
      const plain = await client.messages.countTokens({
        model: 'sim/claude',
        messages: [{ role: 'user', content: 'Think first, then say hello.' }],
      })
      expect(counted.input_tokens).toBe(plain.input_tokens)
    })

    test("an earlier answer's thinking is left out for a model served through chat, its text and calls kept", async () => {
      const message = await client.messages.create({
        model: 'sim/chat',
        max_tokens: 64,
        messages: [
          { role: 'user', content: 'Think, then say hello.' },
          {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: 'They want a greeting.', signature: 'sig' },
              { type: 'redacted_thinking', data: 'opaque' },
              { type: 'text', text: 'Hello.' },
            ],
          },
          { role: 'user', content: 'Again.' },
        ],
      })
      expect(message.type).toBe('message')
      expect(JSON.parse(sim.received().at(-1)!.text).messages).toEqual([
        { role: 'user', content: 'Think, then say hello.' },
        { role: 'assistant', content: 'Hello.' },
        { role: 'user', content: 'Again.' },
      ])
    })

    test("a pool model's tool call ids (functions.get_weather:0) come back as ids Anthropic takes, and a Claude model and the pool take the loop after, streamed or not", async () => {
      sim.configure({ toolCallIds: 'functions' })
      try {
        for (const streamed of [false, true]) {
          const history: Anthropic.MessageParam[] = [
            { role: 'user', content: 'What is the weather in Lisbon?' },
          ]
          const turn = async (model: string, choice: 'any' | 'auto') => {
            const params = {
              model,
              max_tokens: 64,
              tools,
              tool_choice: { type: choice },
              messages: history,
            }
            const message = streamed
              ? await client.messages.stream(params).finalMessage()
              : await client.messages.create(params)
            history.push({ role: 'assistant', content: message.content })
            return message
          }
          const first = await turn('sim/chat', 'any')
          const call = first.content.find((block) => block.type === 'tool_use')!
          expect({ streamed, id: call.id }).toEqual({ streamed, id: 'functions_get_weather_0' })
          history.push({
            role: 'user',
            content: [{ type: 'tool_result', tool_use_id: call.id, content: 'Sunny, 24 C.' }],
          })
          // Passed through as it came: the simulator refuses a tool_use id as Anthropic does.
          const claude = await turn('sim/claude', 'auto')
          expect(claude.content[0]!.type).toBe('text')
          history.push({ role: 'user', content: 'And in Porto?' })
          const again = await turn('sim/chat', 'any')
          const next = again.content.find((block) => block.type === 'tool_use')!
          expect(next.id).toBe('functions_get_weather_1')
          // The pool reads its earlier call under the id the client sent back, call and result alike.
          const sent = JSON.parse(sim.received().at(-1)!.text) as {
            messages: { tool_calls?: { id: string }[]; tool_call_id?: string }[]
          }
          expect(sent.messages[1]!.tool_calls![0]!.id).toBe(call.id)
          expect(sent.messages[2]!.tool_call_id).toBe(call.id)
        }
      } finally {
        sim.configure({ toolCallIds: 'openai' })
      }
    })

    test('errors come in Anthropic shape, with the SDK error class', async () => {
      const error = await client.messages
        .create({ ...ask('sim/chat'), top_k: 3 } as never)
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(Anthropic.BadRequestError)
      const body = (error as { error: { type: string; error: { type: string; message: string } } })
        .error
      expect(body.type).toBe('error')
      expect(body.error.type).toBe('invalid_request_error')
      expect(body.error.message).toStartWith(
        "top_k is not supported for this model's offerings, which take chat completions (a model with an Anthropic offering takes it as sent)",
      )
      // An unknown model: a 404 and, as Anthropic pairs them, not_found_error; said before a
      // field its offerings would not take.
      const unknownFirst = await client.messages
        .create({ ...ask('sim/nope'), top_k: 3 } as never)
        .catch((e: unknown) => e)
      expect(unknownFirst).toBeInstanceOf(Anthropic.NotFoundError)
      const countedUnknown = await client.messages
        .countTokens({
          model: 'sim/nope',
          top_k: 3,
          messages: [{ role: 'user', content: 'x' }],
        } as never)
        .catch((e: unknown) => e)
      expect(countedUnknown).toBeInstanceOf(Anthropic.NotFoundError)
      const model = await client.messages.create(ask('sim/nope')).catch((e: unknown) => e)
      expect(model).toBeInstanceOf(Anthropic.NotFoundError)
      expect((model as InstanceType<typeof Anthropic.NotFoundError>).error).toMatchObject({
        error: { type: 'not_found_error' },
      })
      // A route this gateway does not serve (Anthropic's Files API).
      const unknown = await client.beta.files.list().catch((e: unknown) => e)
      expect(unknown).toBeInstanceOf(Anthropic.NotFoundError)
      // The gateway's own refusals are Anthropic's shape on its surface alone.
      const shapeOf = async (path: string) => {
        const answer = await gw.request(path, key)
        const body = (await answer.json()) as { type?: string; error: { code?: string } }
        return [answer.status, body.type ?? 'native']
      }
      expect(await shapeOf('/anthropic')).toEqual([404, 'error'])
      expect(await shapeOf('/anthropicx')).toEqual([404, 'native'])
      const bad = new Anthropic({
        baseURL: `${gw.url}/anthropic`,
        apiKey: 'mg_nope',
        maxRetries: 0,
      })
      expect(await bad.messages.create(ask('sim/chat')).catch((e: unknown) => e)).toBeInstanceOf(
        Anthropic.AuthenticationError,
      )
    })
  })

  describe('models', () => {
    test('list: the chat models the Messages API here can call, in pages as Anthropic pages them', async () => {
      const all = []
      for await (const model of client.models.list({ limit: 1000 })) all.push(model)
      const ids = all.map((model) => model.id)
      expect(ids).toContain('sim/claude')
      expect(ids).toContain('sim/chat')
      // An embeddings-only model is no Messages model.
      expect(ids).not.toContain('sim/embed')
      for (const model of all) {
        expect(model.type).toBe('model')
        expect(model.created_at).toMatch(/^\d{4}-\d\d-\d\dT/)
      }
      // Two at a time, the SDK follows after_id to the end: the same models, in the same order.
      const first = await client.models.list({ limit: 2 })
      expect(first.data.map((model) => model.id)).toEqual(ids.slice(0, 2))
      expect(first.has_more).toBe(ids.length > 2)
      const paged = []
      for await (const model of client.models.list({ limit: 2 })) paged.push(model.id)
      expect(paged).toEqual(ids)
      const before = await client.models.list({ limit: 2, before_id: ids[3] })
      expect(before.data.map((model) => model.id)).toEqual(ids.slice(1, 3))
    })

    test('retrieve: one model by its id; an unknown one is a 404 in Anthropic shape', async () => {
      const model = await client.models.retrieve('sim/claude')
      expect(model).toMatchObject({ type: 'model', id: 'sim/claude', display_name: 'sim/claude' })
      // By hand, the id's "/" as it is.
      const byHand = await gw.request('/anthropic/v1/models/sim/claude', key)
      expect(byHand.status).toBe(200)
      expect(await byHand.json()).toEqual(model)
      // Not URL-encoding at all: not found, never an error of the gateway's.
      const garbled = await gw.request('/anthropic/v1/models/sim/%zz', key)
      expect(garbled.status).toBe(404)
      expect(((await garbled.json()) as { type: string }).type).toBe('error')
      // By an alias, as a Messages request may name it: the model under its id.
      expect(await client.models.retrieve('chat-small')).toMatchObject({ id: 'sim/chat' })
      const missing = await client.models.retrieve('sim/nope').catch((e: unknown) => e)
      expect(missing).toBeInstanceOf(Anthropic.NotFoundError)
      const wrongKey = new Anthropic({
        baseURL: `${gw.url}/anthropic`,
        apiKey: 'mg_nope',
        maxRetries: 0,
      })
      expect(await wrongKey.models.list().catch((e: unknown) => e)).toBeInstanceOf(
        Anthropic.AuthenticationError,
      )
    })
  })

  describe('message batches', () => {
    test('create, retrieve, list, results in order, delete; native underneath', async () => {
      const ids = ['a-1', 'b_2', 'c-3']
      const created = await client.messages.batches.create({
        requests: ids.map((custom_id, i) => ({
          custom_id,
          params: {
            ...ask('sim/chat'),
            messages: [{ role: 'user', content: `Question ${i}` }],
          },
        })),
      })
      expect(created.id).toStartWith('msgbatch_')
      expect(created.type).toBe('message_batch')
      expect(created.processing_status).toBe('in_progress')
      expect(created.results_url).toBeNull()
      expect(created.created_at).toMatch(/^\d{4}-\d\d-\d\dT/)
      // The native batch it is: the same id after the prefix, listed on the native surface.
      const nativeId = `batch_${created.id.slice('msgbatch_'.length)}`
      const native = await gw.request(`/v1/batches/${nativeId}`, key)
      expect(native.status).toBe(200)
      expect(((await native.json()) as { line_count: number }).line_count).toBe(3)

      const ended = await messageBatchEnded(client, created.id)
      expect(ended.request_counts).toEqual({
        processing: 0,
        succeeded: 3,
        errored: 0,
        canceled: 0,
        expired: 0,
      })
      expect(ended.results_url).toBe(
        `${gw.url}/anthropic/v1/messages/batches/${created.id}/results`,
      )
      expect(ended.ended_at).not.toBeNull()
      // Behind a proxy that ends TLS: the address the client used, from the proxy's headers.
      const resultsUrl = async (headers: Record<string, string>) => {
        const answer = await gw.request(`/anthropic/v1/messages/batches/${created.id}`, key, {
          headers,
        })
        return ((await answer.json()) as { results_url: string }).results_url
      }
      expect(
        await resultsUrl({ 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gw.example.com' }),
      ).toBe(`https://gw.example.com/anthropic/v1/messages/batches/${created.id}/results`)
      expect(await resultsUrl({ 'x-forwarded-proto': 'https, http' })).toStartWith(
        `https://${new URL(gw.url).host}/`,
      )
      // A host header value that is no host is not used.
      expect(await resultsUrl({ 'x-forwarded-host': 'evil.example/x?' })).toStartWith(
        `${gw.url}/anthropic/`,
      )

      const results = []
      for await (const entry of await client.messages.batches.results(created.id))
        results.push(entry)
      expect(results.map((r) => r.custom_id)).toEqual(ids)
      for (const entry of results) {
        expect(entry.result.type).toBe('succeeded')
        if (entry.result.type !== 'succeeded') continue
        expect(entry.result.message.type).toBe('message')
        expect(entry.result.message.model).toBe('sim/chat')
        expect(entry.result.message.content[0].type).toBe('text')
      }

      const page = await client.messages.batches.list({ limit: 10 })
      expect(page.data.map((b) => b.id)).toContain(created.id)

      const listed = (await (await gw.request('/v1/batches', key)).json()) as {
        data: { id: string }[]
      }
      expect(listed.data.map((b) => b.id)).toContain(nativeId)

      // The batch's spend counts against today's limit whether or not the batch is kept.
      const dailyUsed = async () =>
        ((await (await gw.admin(`/accounts/${accountId}`)).json()) as Record<string, string>)
          .daily_spend_used_usd
      const usedBefore = await dailyUsed()
      expect(Number(usedBefore)).toBeGreaterThan(0)
      const deleted = await client.messages.batches.delete(created.id)
      expect(deleted).toEqual({ id: created.id, type: 'message_batch_deleted' })
      expect(await dailyUsed()).toBe(usedBefore)
      expect(
        await client.messages.batches.retrieve(created.id).catch((e: unknown) => e),
      ).toBeInstanceOf(Anthropic.NotFoundError)
    })

    test('list pages newest first by after_id and before_id, also from an id deleted since', async () => {
      // An account of its own, so the list holds only these three.
      const own = new Anthropic({
        baseURL: `${gw.url}/anthropic`,
        apiKey: (await gw.newAccount('1')).key,
        maxRetries: 0,
      })
      for (let i = 0; i < 3; i++)
        await own.messages.batches.create({
          requests: [{ custom_id: 'r', params: ask('sim/chat') }],
        })
      const all = await own.messages.batches.list({ limit: 10 })
      const ids = all.data.map((batch) => batch.id)
      expect(ids.length).toBe(3)
      expect(all.has_more).toBe(false)
      const paged: string[] = []
      for await (const batch of own.messages.batches.list({ limit: 1 })) paged.push(batch.id)
      expect(paged).toEqual(ids)

      const page = async (query: { after_id?: string; before_id?: string }) => {
        const answer = await own.messages.batches.list({ limit: 1, ...query })
        return [answer.data.map((batch) => batch.id), answer.has_more]
      }
      expect(await page({ after_id: ids[0] })).toEqual([[ids[1]], true])
      expect(await page({ before_id: ids[2] })).toEqual([[ids[1]], true])
      expect(await page({ before_id: ids[1] })).toEqual([[ids[0]], false])

      // The newest deleted: nothing is newer than it, and the rest still follow it.
      await messageBatchEnded(own, ids[0])
      await own.messages.batches.delete(ids[0])
      expect(await page({ before_id: ids[0] })).toEqual([[], false])
      expect(await page({ before_id: ids[1] })).toEqual([[], false])
      expect(await page({ after_id: ids[0] })).toEqual([[ids[1]], true])
    })

    test("a Claude model takes each request as it came: fields outside the subset pass, the answer is Anthropic's message", async () => {
      const from = sim.received().length
      const params = {
        ...ask('sim/claude'),
        top_k: 3,
        // A cached system prompt: the simulator reports 4 of its tokens read from the cache.
        system: [
          {
            type: 'text',
            text: 'Answer briefly. [sim:cache read=4]',
            cache_control: { type: 'ephemeral' },
          },
        ],
      }
      const created = await client.messages.batches.create({
        requests: [{ custom_id: 'as-it-came', params } as never],
      })
      await messageBatchEnded(client, created.id)
      const sent = sim
        .received()
        .slice(from)
        .filter((request) => request.path === '/v1/messages')
        .map((request) => JSON.parse(request.text) as Record<string, unknown>)
      expect(sent.length).toBe(1)
      expect(sent[0].top_k).toBe(3)
      expect(sent[0].system).toEqual(params.system)
      expect(sent[0].model).toBe('claude-sim')
      const results = []
      for await (const entry of await client.messages.batches.results(created.id))
        results.push(entry)
      expect(results.length).toBe(1)
      const result = results[0].result
      if (result.type !== 'succeeded') throw new Error(`the request ${result.type}`)
      // Anthropic's own message, kept as it came: its model id and its cache counts.
      expect(result.message.model).toBe('claude-sim')
      expect(result.message.usage.cache_read_input_tokens).toBe(4)
      // Natively a batch of Messages lines, its result the same message, billed for every
      // prompt token it reports (sim/claude has no cache rate: cached ones at the input rate).
      const nativeId = `batch_${created.id.slice('msgbatch_'.length)}`
      const native = (await (await gw.request(`/v1/batches/${nativeId}`, key)).json()) as {
        endpoint: string
        usage: { input_tokens: number; cached_input_tokens: number }
      }
      expect(native.endpoint).toBe('/v1/messages')
      expect(native.usage.cached_input_tokens).toBe(4)
      const [row] = (await (await gw.request(`/v1/batches/${nativeId}/results`, key)).text())
        .trim()
        .split('\n')
        .map((text) => JSON.parse(text) as { cost_usd: string; response: { body: unknown } })
      expect(row.response.body).toEqual(result.message)
      const { input_tokens, cache_read_input_tokens, output_tokens } = result.message.usage
      const prompt = input_tokens + (cache_read_input_tokens ?? 0)
      expect(Number(row.cost_usd)).toBeCloseTo((prompt * 3 + output_tokens * 15) / 1e6, 12)
    })

    test('outside the subset on a model no Anthropic offering serves: an issue naming the field, nothing submitted', async () => {
      const before = (await client.messages.batches.list({ limit: 100 })).data.length
      const error = await client.messages.batches
        .create({
          requests: [
            { custom_id: 'plain', params: ask('sim/chat') },
            { custom_id: 'top-k', params: { ...ask('sim/chat'), top_k: 3 } as never },
          ],
        })
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(Anthropic.BadRequestError)
      const body = (error as { error: { issues: { line: number; path: string }[] } }).error
      expect(body.issues.map((issue) => [issue.line, issue.path])).toEqual([
        [2, 'requests[1].params.top_k'],
      ])
      expect((await client.messages.batches.list({ limit: 100 })).data.length).toBe(before)
    })

    test('a native file cannot name /v1/messages: only a Message Batches create makes such lines', async () => {
      const submitted = await submitNative({
        custom_id: 'm-1',
        method: 'POST',
        url: '/v1/messages',
        body: ask('sim/claude'),
      })
      expect(submitted.status).toBe(400)
      const body = (await submitted.json()) as { issues: { path: string }[] }
      expect(body.issues.map((issue) => issue.path)).toEqual(['url'])
    })

    test('cancel ends a batch, every request succeeded or canceled', async () => {
      // Answers slow enough that the cancel always finds the batch still running.
      sim.configure({ latencyMs: 1500 })
      let slow
      try {
        slow = await client.messages.batches.create({
          requests: Array.from({ length: 3 }, (_, i) => ({
            custom_id: `slow-${i}`,
            params: ask('sim/chat'),
          })),
        })
        const cancelling = await client.messages.batches.cancel(slow.id)
        expect(['canceling', 'ended']).toContain(cancelling.processing_status)
      } finally {
        sim.configure({ latencyMs: 1 })
      }
      const ended = await messageBatchEnded(client, slow.id)
      expect(ended.cancel_initiated_at).not.toBeNull()
      const counts = ended.request_counts
      expect(counts.succeeded + counts.canceled).toBe(3)
    })

    test("a request the provider refuses is errored in Anthropic's ErrorResponse shape, request_id included", async () => {
      const created = await client.messages.batches.create({
        requests: [{ custom_id: 'refused', params: ask('sim/refused') }],
      })
      await messageBatchEnded(client, created.id)
      const results = []
      for await (const entry of await client.messages.batches.results(created.id))
        results.push(entry)
      expect(results.length).toBe(1)
      const result = results[0]!.result
      expect(result.type).toBe('errored')
      if (result.type !== 'errored') return
      expect(result.error).toMatchObject({
        type: 'error',
        error: { type: 'invalid_request_error' },
        request_id: null,
      })
      expect(result.error.error.message.length).toBeGreaterThan(0)
    })

    test("a call the batch's state refuses is a 409 the SDK does not retry: cancelling an ended batch", async () => {
      const done = await client.messages.batches.create({
        requests: [{ custom_id: 'ends', params: ask('sim/chat') }],
      })
      await messageBatchEnded(client, done.id)
      // The SDK's default retries, counted at its fetch: a 409 is a lock timeout to it.
      let sent = 0
      const retrying = new Anthropic({
        baseURL: `${gw.url}/anthropic`,
        apiKey: key,
        maxRetries: 2,
        fetch: (input: string | URL | Request, init?: RequestInit) => {
          sent++
          return fetch(input, init)
        },
      })
      const refused = await retrying.messages.batches.cancel(done.id).catch((e: unknown) => e)
      expect(refused).toBeInstanceOf(Anthropic.ConflictError)
      expect(
        (refused as InstanceType<typeof Anthropic.ConflictError>).headers.get('x-should-retry'),
      ).toBe('false')
      expect(sent).toBe(1)
      // In this API's terms: its id and processing status, not the native batch's.
      const error = (refused as { error: { error: Record<string, unknown> } }).error.error
      expect(error.message).toBe(
        `message batch ${done.id} has ended and can no longer be cancelled`,
      )
      expect(error.processing_status).toBe('ended')
      expect(error.type).toBe('conflict_error')
    })

    test("an invalid request's fix says what to correct, not to leave the translated subset", async () => {
      const { max_tokens: _, ...noLimit } = ask('sim/claude')
      const error = await client.messages.batches
        .create({
          requests: [
            { custom_id: 'no-limit', params: noLimit as never },
            {
              custom_id: 'no-role',
              params: { ...ask('sim/chat'), messages: [{ content: 'hi' }] as never },
            },
            { custom_id: 'outside', params: { ...ask('sim/chat'), top_k: 3 } as never },
          ],
        })
        .catch((e: unknown) => e)
      const issues = (
        error as { error: { issues: { path: string; message: string; fix: string }[] } }
      ).error.issues
      expect(issues.map((issue) => issue.path)).toEqual([
        'requests[0].params.max_tokens',
        'requests[1].params.messages[0].role',
        'requests[2].params.top_k',
      ])
      // sim/claude has an Anthropic offering, and Anthropic needs max_tokens too.
      expect(issues[0].fix).toContain('correct it as the message says')
      expect(issues[0].fix).not.toContain('Anthropic offering')
      expect(issues[1].message).toBe('must be "user" or "assistant"')
      expect(issues[2].fix).toContain('within the subset the gateway translates')
    })

    test('a create over the credit is a 402 that suggests nothing this API cannot send', async () => {
      const poor = await gw.newAccount('0.000001')
      const poorClient = new Anthropic({
        baseURL: `${gw.url}/anthropic`,
        apiKey: poor.key,
        maxRetries: 0,
      })
      const error = await poorClient.messages.batches
        .create({ requests: [{ custom_id: 'r', params: ask('sim/chat') }] })
        .catch((e: unknown) => e)
      expect((error as { status: number }).status).toBe(402)
      const message = (error as { error: { error: { message: string } } }).error.error.message
      expect(message).toContain('add credit')
      // Message Batches have no max_cost_usd to set.
      expect(message).not.toContain('max_cost_usd')
    })

    test('an Idempotency-Key returns the batch its create made; with other requests it is a 422 the SDK raises', async () => {
      const create = (question: string) =>
        client.messages.batches.create(
          {
            requests: [
              {
                custom_id: 'r',
                params: { ...ask('sim/chat'), messages: [{ role: 'user', content: question }] },
              },
            ],
          },
          { headers: { 'idempotency-key': 'msg-once' } },
        )
      const first = await create('the first question')
      expect((await create('the first question')).id).toBe(first.id)
      const reused = await create('another question').catch((e: unknown) => e)
      expect(reused).toBeInstanceOf(Anthropic.UnprocessableEntityError)
      const { error } = (reused as { error: { error: { type: string; message: string } } }).error
      expect(error.type).toBe('invalid_request_error')
      expect(error.message).toContain(`which made batch ${first.id};`)
      // Nothing was made by the refused create: the newest batch is still the key's.
      const newest = await client.messages.batches.list({ limit: 1 })
      expect(newest.data.map((batch) => batch.id)).toEqual([first.id])
    })

    test('a field the create does not take is refused, never dropped unread', async () => {
      const create = async (body: Record<string, unknown>) => {
        const answer = await gw.request('/anthropic/v1/messages/batches', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
        return {
          status: answer.status,
          body: (await answer.json()) as {
            error: { message: string }
            issues?: { path: string }[]
          },
        }
      }
      const request = { custom_id: 'r', params: ask('sim/chat') }
      const outer = await create({ requests: [request], priority: 'high' })
      expect(outer.status).toBe(400)
      expect(outer.body.error.message).toStartWith('priority: this field is not accepted here')
      const inner = await create({ requests: [request, { ...request, custom_id: 's', note: 1 }] })
      expect(inner.status).toBe(400)
      expect(inner.body.issues!.map((issue) => issue.path)).toEqual(['requests[1].note'])
    })

    test('no key at all: a 401 that names the header the SDK sends', async () => {
      const answer = await fetch(`${gw.url}/anthropic/v1/messages/batches`)
      expect(answer.status).toBe(401)
      const body = (await answer.json()) as { type: string; error: { message: string } }
      expect(body.type).toBe('error')
      expect(body.error.message).toContain('x-api-key')
    })

    test('every invalid request is reported at once, nothing submitted', async () => {
      const error = await client.messages.batches
        .create({
          requests: [
            { custom_id: 'ok-1', params: ask('sim/chat') },
            { custom_id: 'has space', params: ask('sim/chat') },
            { custom_id: 'ok-1', params: ask('sim/chat') },
            { custom_id: 'ok-4', params: { ...ask('sim/chat'), max_tokens: 999_999 } },
            // A wrong custom_id does not hide what is wrong in its params.
            { custom_id: 'a b', params: { ...ask('sim/chat'), max_tokens: 999_999 } },
            // Nor does a repeated one; and one too long comes back as an excerpt, not whole.
            { custom_id: 'ok-1', params: { ...ask('sim/chat'), max_tokens: 999_999 } },
            { custom_id: 'x'.repeat(100_000), params: ask('sim/chat') },
          ],
        })
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(Anthropic.BadRequestError)
      const body = (
        error as {
          error: {
            type: string
            error: { type: string }
            issues: { line: number; path: string; custom_id: string | null }[]
          }
        }
      ).error
      expect(body.type).toBe('error')
      expect(body.error.type).toBe('invalid_request_error')
      // The envelope's issues and the engine's, in request order, at once.
      expect(body.issues.map((issue) => [issue.line, issue.path])).toEqual([
        [2, 'requests[1].custom_id'],
        [3, 'requests[2].custom_id'],
        [4, 'requests[3].params.max_tokens'],
        [5, 'requests[4].custom_id'],
        [5, 'requests[4].params.max_tokens'],
        [6, 'requests[5].custom_id'],
        [6, 'requests[5].params.max_tokens'],
        [7, 'requests[6].custom_id'],
      ])
      // Each issue names its request's own custom_id, the one that is wrong included.
      expect(body.issues.map((issue) => issue.custom_id)).toEqual([
        'has space',
        'ok-1',
        'ok-4',
        'a b',
        'a b',
        'ok-1',
        'ok-1',
        `${'x'.repeat(64)}… (100000 characters)`,
      ])
    })

    test('a native batch is no message batch, chat or embeddings: a 404, as the list leaves it out', async () => {
      for (const line of [
        {
          custom_id: 'e-1',
          method: 'POST',
          url: '/v1/embeddings',
          body: { model: 'sim/embed', input: 'hello' },
        },
        { custom_id: 'c-1', method: 'POST', url: '/v1/chat/completions', body: ask('sim/chat') },
      ]) {
        const submitted = await submitNative(line)
        expect(submitted.status).toBe(201)
        const { id } = (await submitted.json()) as { id: string }
        const asMessages = `msgbatch_${id.slice('batch_'.length)}`
        for (const call of [
          () => client.messages.batches.retrieve(asMessages),
          () => client.messages.batches.cancel(asMessages),
        ])
          expect(await call().catch((e: unknown) => e)).toBeInstanceOf(Anthropic.NotFoundError)
        const listed = await client.messages.batches.list({ limit: 1000 })
        expect(listed.data.map((batch) => batch.id)).not.toContain(asMessages)
      }
    })

    test('more requests than a batch holds: an issue at the first one over, as a native file', async () => {
      const requests = Array.from({ length: 101 }, (_, i) => ({
        custom_id: `r-${i}`,
        params: ask('sim/chat'),
      }))
      const error = await client.messages.batches.create({ requests }).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(Anthropic.BadRequestError)
      const body = (error as { error: { issues: { line: number; path: string }[] } }).error
      expect(body.issues.map((issue) => [issue.line, issue.path])).toEqual([[101, 'requests']])
    })
  })
}
