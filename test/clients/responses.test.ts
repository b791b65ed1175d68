/**
 * `POST /v1/responses` with the clients people use, unchanged (docs/clients/responses.md): the `openai` package's
 * responses.create and responses.stream, and the Vercel AI SDK's generateText/streamText with
 * @ai-sdk/openai's default model (the Responses API) and with @ai-sdk/anthropic through
 * /anthropic/v1. Translated to chat completions for OpenAI-compatible and Anthropic offerings.
 */
import { createAnthropic } from '@ai-sdk/anthropic'
import { createOpenAI } from '@ai-sdk/openai'
import { generateObject, generateText, streamText, tool } from 'ai'
import { z } from 'zod'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import OpenAI from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { responsesCatalog, responsesModel } from '../helpers/catalog.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'

let sim: Simulator
let gw: TestGateway
let key: string
let accountId: string
let client: OpenAI

beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1, keepBodies: 50 })
  // A provider that serves the Responses API itself: its calls pass through (docs/clients/responses.md).
  const catalog = responsesCatalog(sim.url)
  catalog.models.push(responsesModel())
  gw = await startTestGateway({ catalog })
  const account = await gw.newAccount('10')
  key = account.key
  accountId = account.accountId
  client = new OpenAI({ baseURL: `${gw.url}/openai/v1`, apiKey: key, maxRetries: 0 })
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

const balance = async () => {
  await gw.credit.flush()
  const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
    balance_usd: string
    held_usd: string
  }
  return account
}

describe('the openai package', () => {
  for (const model of ['sim/chat', 'sim/claude']) {
    test(`responses.create answers a Response, billed (${model})`, async () => {
      const before = await balance()
      const response = await client.responses.create({
        model,
        instructions: 'Answer briefly.',
        input: 'Say hello.',
        max_output_tokens: 64,
        metadata: { ticket: '7' },
      })
      expect(response.object).toBe('response')
      expect(response.id).toStartWith('resp_')
      expect(response.status).toBe('completed')
      expect(response.output[0].type).toBe('message')
      expect(response.output_text.length).toBeGreaterThan(0)
      expect(response.usage!.input_tokens).toBeGreaterThan(0)
      expect(response.usage!.total_tokens).toBe(
        response.usage!.input_tokens + response.usage!.output_tokens,
      )
      expect(response.metadata).toEqual({ ticket: '7' })
      const after = await balance()
      expect(Number(after.balance_usd)).toBeLessThan(Number(before.balance_usd))
    })

    test(`responses.stream sends OpenAI's events in order (${model})`, async () => {
      const stream = client.responses.stream({
        model,
        input: [{ role: 'user', content: [{ type: 'input_text', text: 'Say hello.' }] }],
        max_output_tokens: 64,
      })
      const types: string[] = []
      const sequence: number[] = []
      for await (const event of stream) {
        types.push(event.type)
        sequence.push(event.sequence_number)
      }
      const final = await stream.finalResponse()
      expect(types.slice(0, 4)).toEqual([
        'response.created',
        'response.in_progress',
        'response.output_item.added',
        'response.content_part.added',
      ])
      expect(types).toContain('response.output_text.delta')
      expect(types.slice(-4)).toEqual([
        'response.output_text.done',
        'response.content_part.done',
        'response.output_item.done',
        'response.completed',
      ])
      expect(sequence).toEqual(sequence.map((_, i) => i))
      expect(final.output_text.length).toBeGreaterThan(0)
      expect(final.usage!.output_tokens).toBeGreaterThan(0)
    })
  }

  test('store, previous_response_id and untranslatable fields are 400s naming them', async () => {
    const refused = async (extra: Record<string, unknown>) => {
      const error = await client.responses
        .create({ model: 'sim/chat', input: 'hi', ...extra } as never)
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      return (error as { error: { message: string; param: string } }).error
    }
    const stored = await refused({ store: true })
    expect(stored.message).toStartWith('store true is not supported')
    expect(stored.message).toContain('stores no responses')
    expect((await refused({ store: 'yes' })).message).toBe(
      'store must be a boolean: set it to false or leave it out',
    )
    expect((await refused({ previous_response_id: 'resp_1' })).param).toBe('previous_response_id')
    expect((await refused({ reasoning: { effort: 'low' } })).param).toBe('reasoning')
    // The translated body's own checks speak of the fields the caller sent.
    const tooLong = await refused({ max_output_tokens: 999_999 })
    expect(tooLong.param).toBe('max_output_tokens')
    expect(tooLong.message).toContain('max_output_tokens')
    expect(tooLong.message).not.toContain('max_tokens')
    // The fields a refusal lists are those a request may send.
    const outside = await refused({ truncation: 'auto' })
    expect(outside.message).toContain('store (false)')
    expect(outside.message).not.toContain('previous_response_id')
    // The endpoint and the schema's place are the Responses API's.
    const embeddings = (await client.responses
      .create({ model: 'sim/embed', input: 'hi' })
      .catch((e: unknown) => e)) as { error: { message: string } }
    expect(embeddings.error.message).toStartWith('model sim/embed does not serve /v1/responses;')
    let deep: Record<string, unknown> = { type: 'string' }
    for (let level = 0; level < 12; level++)
      deep = { type: 'object', properties: { a: deep }, required: ['a'] }
    const nested = await refused({
      max_output_tokens: 64,
      text: { format: { type: 'json_schema', name: 'deep', schema: deep } },
    })
    expect(nested.param).toBe('text.format.schema')
    expect(nested.message).toStartWith('text.format.schema nests subschemas more than 10 levels')
    expect(nested.message).not.toContain('json_schema')
    // metadata is OpenAI's map of strings, echoed back: anything else is refused, not echoed.
    for (const metadata of [5, 'x', { a: 5 }, { a: { b: '1' } }, { ['k'.repeat(65)]: 'v' }])
      expect((await refused({ metadata })).param).toStartWith('metadata')
    // A chat check's fix, told in the Responses shape: the schema format is flat in text.format.
    const error = await client.responses
      .create({
        model: 'sim/claude',
        input: 'hi',
        max_output_tokens: 16,
        text: { format: { type: 'json_object' } },
      })
      .catch((e: unknown) => e)
    const jsonObject = (error as { error: { message: string; param: string } }).error
    expect(jsonObject.param).toBe('text.format.type')
    expect(jsonObject.message).toContain(
      'use {"type": "json_schema", "name": "answer", "schema": {…}}',
    )
  })

  for (const stream of [false, true])
    test(`an answer cut at max_output_tokens is incomplete, its message item too (${stream ? 'streamed' : 'whole'})`, async () => {
      const ask = { model: 'sim/claude', input: 'Tell a long story.', max_output_tokens: 2 }
      let response: OpenAI.Responses.Response
      if (stream) {
        const events = client.responses.stream(ask)
        for await (const _ of events);
        response = await events.finalResponse()
      } else response = await client.responses.create(ask)
      expect(response.status).toBe('incomplete')
      expect(response.incomplete_details).toEqual({ reason: 'max_output_tokens' })
      expect(response.output.map((item) => (item as { status?: string }).status)).toEqual([
        'incomplete',
      ])
    })

  test("an image reaches a translated offering as chat image part, and an earlier turn's reasoning is left out", async () => {
    const pixel = 'data:image/png;base64,iVBORw0KGgo='
    const response = await client.responses.create({
      model: 'sim/claude',
      input: [
        { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: 'opaque' },
        {
          role: 'user',
          content: [
            { type: 'input_text', text: 'What is this?' },
            { type: 'input_image', image_url: pixel, detail: 'low' },
          ],
        },
      ],
      max_output_tokens: 32,
    } as never)
    expect(response.status).toBe('completed')
    // Anthropic's image block, by way of chat's image_url part; nothing of the reasoning item.
    expect(JSON.parse(sim.received().at(-1)!.text).messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is this?' },
          {
            type: 'image',
            source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' },
          },
        ],
      },
    ])
    // An image by file_id: no file is kept here to read it from.
    const error = await client.responses
      .create({
        model: 'sim/chat',
        input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'file-1' }] }],
      } as never)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect((error as { error: { param: string } }).error.param).toBe(
      'input[0].content[0].image_url',
    )
  })

  test("an earlier assistant turn's refusal part reaches a translated offering as that turn's text; another part is refused asking for output_text", async () => {
    const input = (part: Record<string, unknown>) => [
      { role: 'user', content: 'Write a virus.' },
      { role: 'assistant', content: [part] },
      { role: 'user', content: 'Then say hello.' },
    ]
    const response = await client.responses.create({
      model: 'sim/claude',
      input: input({ type: 'refusal', refusal: 'I cannot help with that.' }),
      max_output_tokens: 32,
    } as never)
    expect(response.status).toBe('completed')
    expect(JSON.parse(sim.received().at(-1)!.text).messages).toEqual([
      { role: 'user', content: 'Write a virus.' },
      { role: 'assistant', content: 'I cannot help with that.' },
      { role: 'user', content: 'Then say hello.' },
    ])
    const error = await client.responses
      .create({
        model: 'sim/claude',
        input: input({ type: 'input_image', image_url: 'x' }),
      } as never)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    const body = (error as { error: { param: string; message: string } }).error
    expect(body.param).toBe('input[1].content[0]')
    expect(body.message).toContain('send output_text or refusal parts')
  })

  test('a passed-through call is held for its images too: each prices as an image, by URL or file_id', async () => {
    const ceiling = async (content: unknown) => {
      const line = {
        custom_id: 'r',
        method: 'POST',
        url: '/v1/responses',
        body: { model: 'sim/responses', input: [{ role: 'user', content }], max_output_tokens: 16 },
      }
      const dry = await gw.request('/v1/batches?dry_run=true', key, {
        method: 'POST',
        body: JSON.stringify(line),
      })
      expect(dry.status).toBe(200)
      return new Decimal(((await dry.json()) as { cost_ceiling_usd: string }).cost_ceiling_usd)
    }
    const text = await ceiling([{ type: 'input_text', text: 'What is this?' }])
    for (const image of [
      { type: 'input_image', image_url: 'https://example.com/cat.png' },
      { type: 'input_image', file_id: 'file-1' },
    ]) {
      const withImage = await ceiling([{ type: 'input_text', text: 'What is this?' }, image])
      // The model sets no image_input_tokens: an image is held at the default bound, far above
      // the few tokens its JSON text would have priced.
      expect(withImage.minus(text).greaterThan('0.01')).toBe(true)
    }
  })

  test('instructions as a list of items reach a translated offering as its messages, never dropped', async () => {
    const response = await client.responses.create({
      model: 'sim/chat',
      instructions: [
        { role: 'system', content: 'Be terse.' },
        { role: 'developer', content: [{ type: 'input_text', text: 'Use French.' }] },
      ],
      input: 'Say hello.',
      max_output_tokens: 32,
    } as never)
    expect(response.status).toBe('completed')
    expect(JSON.parse(sim.received().at(-1)!.text).messages).toEqual([
      { role: 'system', content: 'Be terse.' },
      // The developer role as the system role every chat server takes.
      { role: 'system', content: 'Use French.' },
      { role: 'user', content: 'Say hello.' },
    ])
    // Neither text nor items: a 400 naming it.
    const error = await client.responses
      .create({ model: 'sim/chat', input: 'hi', instructions: { text: 'x' } } as never)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
    expect((error as { error: { param: string } }).error.param).toBe('instructions')
    // An item that is no object: a 400 naming it, never a 500.
    for (const [field, param] of [
      ['instructions', 'instructions[0]'],
      ['input', 'input[0]'],
    ]) {
      const nulled = await client.responses
        .create({ model: 'sim/chat', input: 'hi', [field!]: [null] } as never)
        .catch((e: unknown) => e)
      expect(nulled).toBeInstanceOf(OpenAI.BadRequestError)
      expect((nulled as { error: { param: string } }).error.param).toBe(param)
    }
  })

  for (const model of ['sim/chat', 'sim/claude'])
    test(`cached prompt tokens are reported streamed as whole (${model})`, async () => {
      const input = 'Say hello. [sim:cache read=4 write=2]'
      const whole = await client.responses.create({ model, input, max_output_tokens: 32 })
      // The tokens written to the cache too, as the chat usage reports them (docs/pricing.md).
      expect(whole.usage!.input_tokens_details).toEqual({
        cached_tokens: 4,
        cache_write_tokens: 2,
      } as never)
      const stream = client.responses.stream({ model, input, max_output_tokens: 32 })
      for await (const _ of stream);
      const streamed = (await stream.finalResponse()).usage!
      expect(streamed.input_tokens_details).toEqual(whole.usage!.input_tokens_details)
      expect(streamed.input_tokens).toBe(whole.usage!.input_tokens)
    })

  test('also at the root /v1/responses, with a json_schema text format', async () => {
    const root = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 })
    const response = await root.responses.create({
      model: 'sim/chat',
      input: 'Give a JSON object.',
      max_output_tokens: 64,
      text: {
        format: {
          type: 'json_schema',
          name: 'answer',
          schema: { type: 'object', properties: { a: { type: 'string' } } },
        },
      },
    })
    expect(response.status).toBe('completed')
    expect(response.text?.format?.type).toBe('json_schema')
  })
})

describe('passed through to a provider with responses_api', () => {
  const lastSent = () => {
    const sent = sim.received().at(-1)!
    return { path: sent.path, body: JSON.parse(sent.text) as Record<string, unknown> }
  }

  test('responses.create goes to /v1/responses as it came, billed from its usage', async () => {
    const before = await balance()
    const response = await client.responses.create({
      model: 'sim/responses',
      input: 'Say hello.',
      max_output_tokens: 64,
      // Outside the translated subset: passed through, not refused.
      truncation: 'auto',
    })
    const sent = lastSent()
    expect(sent.path).toBe('/v1/responses')
    expect(sent.body.model).toBe('sim-responses-model')
    expect(sent.body.truncation).toBe('auto')
    // Nothing is stored, also at the provider: OpenAI keeps responses unless told not to.
    expect(sent.body.store).toBe(false)
    expect(response.id).toStartWith('resp_sim')
    expect(response.output_text.length).toBeGreaterThan(0)
    const after = await balance()
    expect(Number(after.balance_usd)).toBeLessThan(Number(before.balance_usd))
  })

  test('fields outside the subset sent at their default are taken (a client sending back what a Response shows)', async () => {
    const response = await client.responses.create({
      model: 'sim/chat',
      input: 'hi',
      max_output_tokens: 16,
      truncation: 'disabled',
      background: false,
      include: [],
      top_logprobs: 0,
      reasoning: {},
    } as never)
    expect(response.status).toBe('completed')
    // Another value of one of them is still a 400 naming it.
    for (const [field, value] of [
      ['truncation', 'auto'],
      ['include', ['message.output_text.logprobs']],
      ['top_logprobs', 2],
      ['constructor', {}],
    ] as const) {
      const error = await client.responses
        .create({ model: 'sim/chat', input: 'hi', max_output_tokens: 16, [field]: value } as never)
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      expect((error as { error: { param: string } }).error.param).toBe(field)
    }
  })

  test('a model not in the catalog is said first, before a field its offerings would not take', async () => {
    const error = await client.responses
      .create({ model: 'gpt-9', input: 'hi', reasoning: { effort: 'low' } } as never)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.NotFoundError)
    expect((error as { error: { code: string } }).error.code).toBe('model_not_found')
  })

  test('conversation and background are 400s, passed through or not: nothing is stored to use them', async () => {
    const before = sim.received().length
    for (const model of ['sim/responses', 'sim/chat'])
      for (const [field, value] of [
        ['conversation', 'conv_1'],
        ['background', true],
      ] as const) {
        const error = await client.responses
          .create({ model, input: 'hi', max_output_tokens: 16, [field]: value } as never)
          .catch((e: unknown) => e)
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        const { param, message } = (error as { error: { param: string; message: string } }).error
        expect(param).toBe(field)
        expect(message).toContain('stores no responses')
      }
    expect(sim.received().length).toBe(before)
  })

  test('stream as a string is a 400 naming it, passed through or not, never an answer of the other form', async () => {
    const before = sim.received().length
    for (const model of ['sim/responses', 'sim/chat', 'sim/claude']) {
      const error = await client.responses
        .create({ model, input: 'hi', max_output_tokens: 16, stream: 'true' } as never)
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      const { param, message } = (error as { error: { param: string; message: string } }).error
      expect(param).toBe('stream')
      expect(message).toContain('write stream as true, without quotes')
    }
    expect(sim.received().length).toBe(before)
  })

  test('a stored response is asked for: a 404 saying none is stored, on every route OpenAI has for one', async () => {
    const asks = [
      client.responses.retrieve('resp_1'),
      client.responses.delete('resp_1'),
      client.responses.cancel('resp_1'),
      client.responses.inputItems.list('resp_1'),
    ]
    for (const ask of asks) {
      const error = await (ask as Promise<unknown>).catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.NotFoundError)
      expect((error as { error: { message: string } }).error.message).toContain(
        'stores no responses',
      )
    }
    // OpenAI's routes there that are no response are plain unknown routes.
    const counted = await gw.request('/openai/v1/responses/input_tokens', key, { method: 'POST' })
    expect(((await counted.json()) as { error: { code: string } }).error.code).toBe('unknown_route')
  })

  test('a stream the upstream closes before its end is told as failed, not completed, and not billed', async () => {
    const before = await balance()
    sim.configure({ cutRate: 1 })
    try {
      for (const model of ['sim/responses', 'sim/chat']) {
        const response = await gw.request('/v1/responses', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model, input: 'Say hello.', max_output_tokens: 64, stream: true }),
        })
        expect(response.status).toBe(200)
        const types = [...(await response.text()).matchAll(/^event: (\S+)$/gm)].map((m) => m[1])
        expect(types).not.toContain('response.completed')
        // OpenAI's error event, passed through or translated.
        expect(types.at(-1)).toBe('error')
      }
    } finally {
      sim.configure({ cutRate: 0 })
    }
    const after = await balance()
    expect(after.balance_usd).toBe(before.balance_usd)
    expect(after.held_usd).toBe(before.held_usd)
  })

  test('a stream broken off, after some events or at its first, numbers every event in order, the error too, translated as passed through', async () => {
    for (const fault of ['cutRate', 'malformedRate'] as const) {
      sim.configure({ [fault]: 1 })
      try {
        for (const model of ['sim/responses', 'sim/chat']) {
          const response = await gw.request('/v1/responses', key, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({
              model,
              input: 'Say hello.',
              max_output_tokens: 64,
              stream: true,
            }),
          })
          expect(response.status).toBe(200)
          const text = await response.text()
          const types = [...text.matchAll(/^event: (\S+)$/gm)].map((m) => m[1])
          const numbers = [...text.matchAll(/^data: (.+)$/gm)].map(
            (m) => (JSON.parse(m[1]!) as { sequence_number?: number }).sequence_number,
          )
          expect({ fault, model, last: types.at(-1) }).toEqual({ fault, model, last: 'error' })
          // As OpenAI numbers a stream's events: 0, 1, 2, …
          expect(numbers).toEqual(numbers.map((_, i) => i))
          // Broken at its first event, a stream is the error alone, translated or not.
          if (types.length > 1)
            expect(types.slice(0, 2)).toEqual(['response.created', 'response.in_progress'])
        }
      } finally {
        sim.configure({ [fault]: 0 })
      }
    }
  })

  test('a stream broken mid-answer ends as OpenAI ends one, translated as passed through: responses.stream().finalResponse() rejects with APIError, the text already sent kept by the client', async () => {
    sim.configure({ cutRate: 1 })
    try {
      const endings: Record<string, unknown>[] = []
      for (const model of ['sim/responses', 'sim/chat', 'sim/claude']) {
        const stream = client.responses.stream({
          model,
          input: 'Say hello.',
          max_output_tokens: 64,
        })
        const types: string[] = []
        let text = ''
        stream.on('event', (event) => types.push(event.type))
        stream.on('response.output_text.delta', (event) => (text += event.delta))
        const error = await stream.finalResponse().catch((e: unknown) => e)
        expect({ model, rejected: error instanceof OpenAI.APIError }).toEqual({
          model,
          rejected: true,
        })
        expect((error as InstanceType<typeof OpenAI.APIError>).message).toContain(
          'the upstream stream broke off',
        )
        // Text was streamed before the break, and no Response claims to be the answer.
        expect(text.length).toBeGreaterThan(0)
        expect(types).not.toContain('response.failed')
        expect(types).not.toContain('response.completed')

        const raw = await gw.request('/v1/responses', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model, input: 'Say hello.', max_output_tokens: 64, stream: true }),
        })
        const events = [...(await raw.text()).matchAll(/^data: (.+)$/gm)].map(
          (m) => JSON.parse(m[1]!) as Record<string, unknown>,
        )
        expect(events.map((event) => event.type)).toContain('response.output_text.delta')
        const { sequence_number, ...ending } = events.at(-1)!
        expect(sequence_number).toBe(events.length - 1)
        endings.push(ending)
      }
      // The same error event however the model is served.
      expect(endings).toEqual(
        Array(3).fill({
          type: 'error',
          code: 'server_error',
          message: 'the upstream stream broke off',
          param: null,
        }),
      )
    } finally {
      sim.configure({ cutRate: 0 })
    }
  })

  test("a service tier other than the default is a 400 naming it, passed through or not: the offering's lane sets it", async () => {
    const before = sim.received().length
    for (const model of ['sim/responses', 'sim/chat']) {
      const error = await client.responses
        .create({ model, input: 'hi', max_output_tokens: 16, service_tier: 'priority' })
        .catch((e: unknown) => e)
      expect(error).toBeInstanceOf(OpenAI.BadRequestError)
      const { param, message } = (error as { error: { param: string; message: string } }).error
      expect(param).toBe('service_tier')
      expect(message).toContain('provider.only')
    }
    expect(sim.received().length).toBe(before)
    // The provider's default tier, asked for by name, goes as it came, or in its chat translation.
    for (const [model, path] of [
      ['sim/responses', '/v1/responses'],
      ['sim/chat', '/v1/chat/completions'],
    ]) {
      await client.responses.create({
        model,
        input: 'hi',
        max_output_tokens: 16,
        service_tier: 'default',
      })
      expect(lastSent()).toMatchObject({ path, body: { service_tier: 'default' } })
    }
  })

  test('its cached input tokens are billed at the cached rate', async () => {
    const before = await balance()
    const response = await client.responses.create({
      model: 'sim/responses',
      input: 'Say hello to the team. [sim:cache read=4]',
      max_output_tokens: 64,
    })
    const usage = response.usage!
    expect(usage.input_tokens_details.cached_tokens).toBe(4)
    const cost = new Decimal(usage.input_tokens - 4)
      .times(1)
      .plus(new Decimal(4).times('0.1'))
      .plus(new Decimal(usage.output_tokens).times(2))
      .div(1_000_000)
    const after = await balance()
    expect(new Decimal(before.balance_usd).minus(after.balance_usd).equals(cost)).toBe(true)
  })

  test('batch lines are passed through as the live call is, their fields outside the subset kept', async () => {
    const before = sim.received().length
    const lines = [1, 2].map((n) => ({
      custom_id: `p-${n}`,
      method: 'POST',
      url: '/v1/responses',
      body: {
        model: 'sim/responses',
        input: `Say hello ${n}. [sim:cache read=2]`,
        max_output_tokens: 32,
        truncation: 'auto',
      },
    }))
    const submitted = await gw.request('/v1/batches', key, {
      method: 'POST',
      headers: { 'content-type': 'application/jsonl' },
      body: lines.map((line) => JSON.stringify(line)).join('\n'),
    })
    expect(submitted.status).toBe(201)
    const { id } = (await submitted.json()) as { id: string }
    const ended = await waitFor('the batch to end', async () => {
      const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
        status: string
        usage: { cached_input_tokens: number }
      }
      return batch.status === 'completed' ? batch : null
    })
    const sent = sim.received().slice(before)
    expect(sent.map((request) => request.path)).toEqual(['/v1/responses', '/v1/responses'])
    for (const request of sent) {
      const body = JSON.parse(request.text) as Record<string, unknown>
      expect(body.truncation).toBe('auto')
      expect(body.store).toBe(false)
    }
    const rows = (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
      .trim()
      .split('\n')
      .map(
        (row) =>
          JSON.parse(row) as {
            cost_usd: string
            response: {
              body: {
                id: string
                object: string
                usage: { input_tokens: number; output_tokens: number }
              }
            }
          },
      )
    for (const row of rows) {
      // The provider's own Response object, billed with its cached tokens at the cached rate.
      expect(row.response.body.object).toBe('response')
      expect(row.response.body.id).toStartWith('resp_sim')
      const { input_tokens: input, output_tokens: output } = row.response.body.usage
      const cost = new Decimal(input - 2)
        .plus(new Decimal(2).times('0.1'))
        .plus(new Decimal(output).times(2))
        .div(1_000_000)
      expect(new Decimal(row.cost_usd).equals(cost)).toBe(true)
    }
    expect(ended.usage.cached_input_tokens).toBe(4)
  })

  test('responses.stream relays the provider events', async () => {
    const stream = client.responses.stream({ model: 'sim/responses', input: 'Say hello.' })
    const types: string[] = []
    for await (const event of stream) types.push(event.type)
    expect(lastSent().path).toBe('/v1/responses')
    expect(types[0]).toBe('response.created')
    expect(types.at(-1)).toBe('response.completed')
    expect((await stream.finalResponse()).usage!.output_tokens).toBeGreaterThan(0)
  })

  test('store: true is refused there too: nothing is stored', async () => {
    const error = await client.responses
      .create({ model: 'sim/responses', input: 'hi', store: true })
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(OpenAI.BadRequestError)
  })
})

describe('the Vercel AI SDK', () => {
  test('generateText and streamText with @ai-sdk/openai defaults (the Responses API)', async () => {
    const openai = createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: key })
    const generated = await generateText({
      model: openai('sim/chat'),
      prompt: 'Say hello.',
      maxOutputTokens: 64,
    })
    expect(generated.text.length).toBeGreaterThan(0)
    expect(generated.usage.outputTokens).toBeGreaterThan(0)
    const streamed = streamText({
      model: openai('sim/chat'),
      prompt: 'Say hello.',
      maxOutputTokens: 64,
    })
    let text = ''
    for await (const delta of streamed.textStream) text += delta
    expect(text.length).toBeGreaterThan(0)
    expect(await streamed.finishReason).toBe('stop')
  })

  test("a second turn: the SDK's references to earlier items are refused in words that say how to send them; with store false it works", async () => {
    const openai = createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: key })
    for (const model of ['sim/chat', 'sim/responses']) {
      const first = await generateText({
        model: openai(model),
        prompt: 'Say hello.',
        maxOutputTokens: 32,
      })
      const messages = [
        { role: 'user' as const, content: 'Say hello.' },
        ...first.response.messages,
        { role: 'user' as const, content: 'Again.' },
      ]
      // Unless told the responses are not stored, the SDK names its earlier turn by the item's id.
      const before = sim.received().length
      const error = (await generateText({
        model: openai(model),
        messages,
        maxOutputTokens: 32,
      }).catch((e: unknown) => e)) as { statusCode: number; responseBody: string }
      expect([model, error.statusCode]).toEqual([model, 400])
      const refusal = JSON.parse(error.responseBody) as {
        error: { param: string; message: string }
      }
      expect(refusal.error.param).toBe('input[1]')
      expect(refusal.error.message).toContain('stores no responses')
      expect(refusal.error.message).toContain('providerOptions: { openai: { store: false } }')
      // Refused before any call: nothing went upstream (OpenAI could not resolve it either).
      expect(sim.received().length).toBe(before)
      const second = await generateText({
        model: openai(model),
        messages,
        maxOutputTokens: 32,
        providerOptions: { openai: { store: false } },
      })
      expect(second.text.length).toBeGreaterThan(0)
    }
  })

  test("generateObject with @ai-sdk/openai defaults: a text.format schema's object, translated or passed through", async () => {
    const openai = createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: key })
    const schema = z.object({ name: z.string(), tags: z.array(z.string()) })
    for (const model of ['sim/chat', 'sim/responses']) {
      const before = sim.received().length
      const generated = await generateObject({
        model: openai(model),
        schema,
        prompt: 'Name a cat.',
      })
      expect(schema.safeParse(generated.object).success).toBe(true)
      const sent = sim.received().slice(before)
      // Passed through as the Responses API asks, or as chat's response_format.
      expect(sent.map((request) => request.path)).toEqual([
        model === 'sim/responses' ? '/v1/responses' : '/v1/chat/completions',
      ])
    }
  })

  test('a tool call the model must make, on every surface, passed through or translated', async () => {
    const openai = createOpenAI({ baseURL: `${gw.url}/v1`, apiKey: key })
    const anthropic = createAnthropic({ baseURL: `${gw.url}/anthropic/v1`, apiKey: key })
    const tools = {
      weather: tool({
        description: 'The weather in a city.',
        inputSchema: z.object({ city: z.string() }),
      }),
    }
    const models = [
      ['responses, translated to chat', openai('sim/chat')],
      ['responses, translated to Anthropic', openai('sim/claude')],
      ['responses, passed through', openai('sim/responses')],
      ['chat completions, translated to Anthropic', openai.chat('sim/claude')],
      ['messages, passed through', anthropic('sim/claude')],
      ['messages, translated to chat', anthropic('sim/chat')],
    ] as const
    const choices = ['required', { type: 'tool', toolName: 'weather' }] as const
    for (const [surface, model] of models)
      for (const toolChoice of choices) {
        const ask = { model, tools, toolChoice, prompt: 'Weather in Oslo?' }
        const generated = await generateText({ ...ask, maxOutputTokens: 64 })
        expect([surface, generated.finishReason]).toEqual([surface, 'tool-calls'])
        expect(generated.toolCalls).toHaveLength(1)
        expect(generated.toolCalls[0]!.toolName).toBe('weather')
        expect(typeof (generated.toolCalls[0]!.input as { city: unknown }).city).toBe('string')
        const streamed = streamText({ ...ask, maxOutputTokens: 64 })
        const calls = await streamed.toolCalls
        expect([surface, calls.map((call) => call.input)]).toEqual([
          surface,
          generated.toolCalls.map((call) => call.input),
        ])
      }
  })

  test('generateText and streamText with @ai-sdk/anthropic through /anthropic/v1', async () => {
    const anthropic = createAnthropic({ baseURL: `${gw.url}/anthropic/v1`, apiKey: key })
    for (const model of ['sim/claude', 'sim/chat']) {
      const generated = await generateText({
        model: anthropic(model),
        system: 'Answer briefly.',
        prompt: 'Say hello.',
        maxOutputTokens: 64,
      })
      expect(generated.text.length).toBeGreaterThan(0)
      expect(generated.finishReason).toBe('stop')
      const streamed = streamText({
        model: anthropic(model),
        prompt: 'Say hello.',
        maxOutputTokens: 64,
      })
      let text = ''
      for await (const delta of streamed.textStream) text += delta
      expect(text.length).toBeGreaterThan(0)
      expect((await streamed.usage).outputTokens).toBeGreaterThan(0)
    }
  })
})
