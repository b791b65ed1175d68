/**
 * Forced tool calls from the upstream simulator, in OpenAI chat completions, Anthropic Messages
 * and OpenAI's Responses API, plain and streamed, over real HTTP; and the official SDKs parsing
 * them. The call's arguments are an instance of the tool's schema whose strings are the text
 * reply the same prompt gets without tools, so each test can say exactly what they must be.
 */
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'

let sim: Simulator

beforeAll(async () => {
  sim = await startSimulator({ seed: 7 })
})
afterAll(async () => {
  await sim.stop()
})
beforeEach(() => {
  sim.configure({ latencyMs: 0, requireApiKey: null })
})

async function post(path: string, body: unknown): Promise<{ status: number; text: string }> {
  const response = await fetch(`${sim.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
    body: JSON.stringify(body),
  })
  return { status: response.status, text: await response.text() }
}

async function postJson(path: string, body: unknown): Promise<Record<string, any>> {
  const { status, text } = await post(path, body)
  expect(status).toBe(200)
  return JSON.parse(text)
}

/** The events of a stream as (name, data) pairs; OpenAI's nameless ones named null. */
async function postStream(path: string, body: object): Promise<[string | null, any][]> {
  const { status, text } = await post(path, { ...body, stream: true })
  expect(status).toBe(200)
  return text
    .split('\n\n')
    .filter((event) => event !== '' && event !== 'data: [DONE]')
    .map((event) => {
      const name = /^event: (.*)$/m.exec(event)?.[1] ?? null
      const data = /^data: (.*)$/m.exec(event)?.[1] ?? 'null'
      return [name, JSON.parse(data)]
    })
}

/** Words, as the simulator counts completion tokens. */
const words = (text: string) => text.split(/\s+/).filter(Boolean).length

const messages = [{ role: 'user', content: 'What is the weather in Lisbon this week?' }]
const weatherSchema = {
  type: 'object',
  properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 } },
  required: ['city', 'days'],
}
const clockSchema = {
  type: 'object',
  properties: { zone: { type: 'string', enum: ['UTC', 'CET'] } },
  required: ['zone'],
}

/** The text the prompt gets with no tools: the string in the call's arguments. */
async function plainText(): Promise<string> {
  const body = await postJson('/v1/chat/completions', { model: 'sim-chat', messages })
  return body.choices[0].message.content
}

/** The same for Anthropic's model (the text's tag hashes the model name). */
async function plainClaudeText(): Promise<string> {
  const body = await postJson('/v1/messages', { model: 'sim-claude', max_tokens: 200, messages })
  return body.content[0].text
}

describe('OpenAI chat completions', () => {
  const tools = [
    { type: 'function', function: { name: 'get_weather', parameters: weatherSchema } },
    { type: 'function', function: { name: 'get_time', parameters: clockSchema } },
  ]
  const chat = { model: 'sim-chat', messages, tools }

  test('tool_choice "required" calls the first function tool, usage counting its arguments', async () => {
    const text = await plainText()
    const body = await postJson('/v1/chat/completions', { ...chat, tool_choice: 'required' })
    const [choice] = body.choices
    expect(choice.finish_reason).toBe('tool_calls')
    const { tool_calls: calls, ...rest } = choice.message
    expect(rest).toEqual({ role: 'assistant', content: null, refusal: null })
    expect(calls).toHaveLength(1)
    expect(calls[0].id).toMatch(/^call_\w+$/)
    expect(calls[0].type).toBe('function')
    expect(calls[0].function.name).toBe('get_weather')
    expect(JSON.parse(calls[0].function.arguments)).toEqual({ city: text, days: 1 })
    expect(body.usage.completion_tokens).toBe(words(calls[0].function.arguments))
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens)
  })

  test('a named function choice calls that function, in every choice, ending it stop as OpenAI does', async () => {
    const tool_choice = { type: 'function', function: { name: 'get_time' } }
    const body = await postJson('/v1/chat/completions', { ...chat, tool_choice, n: 2 })
    expect(body.choices).toHaveLength(2)
    for (const choice of body.choices) {
      expect(choice.finish_reason).toBe('stop')
      expect(choice.message.tool_calls[0].function).toEqual({
        name: 'get_time',
        arguments: '{"zone": "UTC"}',
      })
    }
    expect(body.choices[0].message.tool_calls[0].id).not.toBe(
      body.choices[1].message.tool_calls[0].id,
    )
    expect(body.usage.completion_tokens).toBe(2 * words('{"zone": "UTC"}'))
  })

  test('max_tokens cuts the arguments and ends the choice by length', async () => {
    const body = await postJson('/v1/chat/completions', {
      ...chat,
      tool_choice: 'required',
      max_tokens: 3,
    })
    const [choice] = body.choices
    expect(choice.finish_reason).toBe('length')
    expect(words(choice.message.tool_calls[0].function.arguments)).toBe(3)
    expect(body.usage.completion_tokens).toBe(3)
  })

  test('streamed: id and name first, then argument pieces, then finish_reason tool_calls', async () => {
    const asked = { ...chat, tool_choice: 'required', stream_options: { include_usage: true } }
    const whole = await postJson('/v1/chat/completions', asked)
    const events = await postStream('/v1/chat/completions', asked)
    const chunks = events.map(([, data]) => data)
    const first = chunks[0].choices[0]
    expect(first.delta).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [
        {
          index: 0,
          id: expect.stringMatching(/^call_\w+$/),
          type: 'function',
          function: { name: 'get_weather', arguments: '' },
        },
      ],
      refusal: null,
    })
    const middle = chunks.slice(1, -2).map((chunk) => chunk.choices[0])
    expect(middle.length).toBeGreaterThan(1)
    let args = ''
    for (const { delta, finish_reason } of middle) {
      expect(finish_reason).toBeNull()
      expect(Object.keys(delta)).toEqual(['tool_calls'])
      expect(delta.tool_calls).toHaveLength(1)
      expect(Object.keys(delta.tool_calls[0]).sort()).toEqual(['function', 'index'])
      args += delta.tool_calls[0].function.arguments
    }
    expect(args).toBe(whole.choices[0].message.tool_calls[0].function.arguments)
    expect(chunks.at(-2).choices[0]).toEqual({
      index: 0,
      delta: {},
      logprobs: null,
      finish_reason: 'tool_calls',
    })
    expect(chunks.at(-1).usage).toEqual(whole.usage)
  })

  test('toolCallIds "functions" names calls as Kimi K2 on vLLM does: functions.<name>:<n>, n the calls before it, plain and streamed', async () => {
    sim.configure({ toolCallIds: 'functions' })
    try {
      const asked = { ...chat, tool_choice: 'required' }
      const body = await postJson('/v1/chat/completions', asked)
      expect(body.choices[0].message.tool_calls[0].id).toBe('functions.get_weather:0')
      const earlier = [
        ...messages,
        { role: 'assistant', content: null, tool_calls: body.choices[0].message.tool_calls },
        { role: 'tool', tool_call_id: 'functions.get_weather:0', content: 'rain' },
      ]
      const events = await postStream('/v1/chat/completions', { ...asked, messages: earlier })
      expect(events[0]![1].choices[0].delta.tool_calls[0].id).toBe('functions.get_weather:1')
    } finally {
      sim.configure({ toolCallIds: 'openai' })
    }
  })

  test('tool_choice "auto", "none" or absent still answers text', async () => {
    const text = await plainText()
    for (const choice of [{ tool_choice: 'auto' }, { tool_choice: 'none' }, {}]) {
      const body = await postJson('/v1/chat/completions', { ...chat, ...choice })
      expect(body.choices[0].message).toEqual({ role: 'assistant', content: text, refusal: null })
      expect(body.choices[0].finish_reason).toBe('stop')
    }
  })
})

describe('Anthropic Messages', () => {
  const tools = [
    { name: 'get_weather', description: 'The weather', input_schema: weatherSchema },
    { name: 'get_time', input_schema: clockSchema },
  ]
  const ask = { model: 'sim-claude', max_tokens: 200, messages, tools }

  test('tool_choice any calls the first tool: one tool_use block, stop_reason tool_use', async () => {
    const text = await plainClaudeText()
    const body = await postJson('/v1/messages', { ...ask, tool_choice: { type: 'any' } })
    expect(body.content).toEqual([
      {
        type: 'tool_use',
        id: expect.stringMatching(/^toolu_\w+$/),
        name: 'get_weather',
        input: { city: text, days: 1 },
      },
    ])
    expect(body.stop_reason).toBe('tool_use')
    expect(body.stop_sequence).toBeNull()
  })

  test('a tool choice by name calls that tool', async () => {
    const tool_choice = { type: 'tool', name: 'get_time' }
    const body = await postJson('/v1/messages', { ...ask, tool_choice })
    expect(body.content[0]).toMatchObject({ type: 'tool_use', name: 'get_time' })
    expect(body.content[0].input).toEqual({ zone: 'UTC' })
    expect(body.usage.output_tokens).toBe(words('{"zone": "UTC"}'))
  })

  test('streamed: a tool_use block opened with input {}, input_json_delta pieces, stop_reason tool_use', async () => {
    const asked = { ...ask, tool_choice: { type: 'any' } }
    const whole = await postJson('/v1/messages', asked)
    const events = await postStream('/v1/messages', asked)
    const names = events.map(([name]) => name)
    const deltas = events.filter(([name]) => name === 'content_block_delta').map(([, d]) => d)
    expect(names).toEqual([
      'message_start',
      'content_block_start',
      'ping',
      ...deltas.map(() => 'content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ])
    expect(events[1][1].content_block).toEqual({
      type: 'tool_use',
      id: expect.stringMatching(/^toolu_\w+$/),
      name: 'get_weather',
      input: {},
    })
    expect(deltas.length).toBeGreaterThan(2)
    for (const data of deltas) expect(data.delta.type).toBe('input_json_delta')
    const json = deltas.map((data) => data.delta.partial_json).join('')
    expect(JSON.parse(json)).toEqual(whole.content[0].input)
    const end = events.at(-2)![1]
    expect(end.delta).toEqual({ stop_reason: 'tool_use', stop_sequence: null })
    expect(end.usage.output_tokens).toBe(words(json))
    expect(whole.usage.output_tokens).toBe(words(json))
  })

  test('tool_choice auto still answers text', async () => {
    const text = await plainClaudeText()
    const body = await postJson('/v1/messages', { ...ask, tool_choice: { type: 'auto' } })
    expect(body.content).toEqual([{ type: 'text', text }])
    expect(body.stop_reason).toBe('end_turn')
  })
})

describe('OpenAI Responses API', () => {
  const tools = [
    { type: 'function', name: 'get_weather', parameters: weatherSchema, strict: true },
    { type: 'function', name: 'get_time', parameters: clockSchema, strict: true },
  ]
  const input = messages[0].content
  const ask = { model: 'sim-chat', input, tools }

  test('tool_choice "required" answers one function_call item, usage counting its arguments', async () => {
    const text = await plainText()
    const body = await postJson('/v1/responses', { ...ask, tool_choice: 'required' })
    expect(body.status).toBe('completed')
    expect(body.output).toEqual([
      {
        type: 'function_call',
        id: expect.stringMatching(/^fc_\w+$/),
        call_id: expect.stringMatching(/^call_\w+$/),
        name: 'get_weather',
        arguments: expect.any(String),
        status: 'completed',
      },
    ])
    expect(JSON.parse(body.output[0].arguments)).toEqual({ city: text, days: 1 })
    expect(body.usage.output_tokens).toBe(words(body.output[0].arguments))
    expect(body.usage.total_tokens).toBe(body.usage.input_tokens + body.usage.output_tokens)
  })

  test('a named function choice calls that function', async () => {
    const body = await postJson('/v1/responses', {
      ...ask,
      tool_choice: { type: 'function', name: 'get_time' },
    })
    expect(body.output[0]).toMatchObject({ name: 'get_time', arguments: '{"zone": "UTC"}' })
  })

  test('streamed: item added with arguments "", argument deltas, done events, then completed', async () => {
    const asked = { ...ask, tool_choice: 'required' }
    const whole = await postJson('/v1/responses', asked)
    const events = (await postStream('/v1/responses', asked)).map(([, data]) => data)
    const types = events.map((event) => event.type)
    const pieces = events.filter((e) => e.type === 'response.function_call_arguments.delta')
    expect(types).toEqual([
      'response.created',
      'response.in_progress',
      'response.output_item.added',
      ...pieces.map(() => 'response.function_call_arguments.delta'),
      'response.function_call_arguments.done',
      'response.output_item.done',
      'response.completed',
    ])
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, i) => i))
    const item = whole.output[0]
    expect(events[2].item).toEqual({
      ...item,
      id: expect.any(String),
      call_id: expect.any(String),
      arguments: '',
      status: 'in_progress',
    })
    const itemId = events[2].item.id
    expect(pieces.length).toBeGreaterThan(1)
    for (const piece of pieces) expect(piece.item_id).toBe(itemId)
    const args = pieces.map((piece) => piece.delta).join('')
    expect(args).toBe(item.arguments)
    expect(events.at(-3)).toMatchObject({ item_id: itemId, arguments: args })
    expect(events.at(-2).item).toEqual({ ...events[2].item, arguments: args, status: 'completed' })
    const completed = events.at(-1).response
    expect(completed.status).toBe('completed')
    expect(completed.output).toEqual([events.at(-2).item])
    expect(completed.usage).toEqual(whole.usage)
  })

  test('tool_choice "auto" still answers a message', async () => {
    const text = await plainText()
    const body = await postJson('/v1/responses', { ...ask, tool_choice: 'auto' })
    expect(body.output).toHaveLength(1)
    expect(body.output[0]).toMatchObject({ type: 'message', role: 'assistant' })
    expect(body.output[0].content[0]).toMatchObject({ type: 'output_text', text })
  })

  test('the Response echoes the request settings, with defaults for those not sent', async () => {
    const defaults = await postJson('/v1/responses', { model: 'sim-chat', input })
    expect(defaults).toMatchObject({
      instructions: null,
      metadata: {},
      tools: [],
      tool_choice: 'auto',
      temperature: 1,
      top_p: 1,
      parallel_tool_calls: true,
      max_output_tokens: null,
      text: { format: { type: 'text' } },
      store: true,
    })
    const settings = {
      instructions: 'Answer in one line.',
      metadata: { ticket: '42' },
      tools,
      tool_choice: 'auto',
      temperature: 0.2,
      top_p: 0.9,
      parallel_tool_calls: false,
      max_output_tokens: 300,
      text: { format: { type: 'json_object' } },
      store: false,
    }
    const sent = await postJson('/v1/responses', { model: 'sim-chat', input, ...settings })
    expect(sent).toMatchObject(settings)
    const events = await postStream('/v1/responses', { model: 'sim-chat', input, ...settings })
    const echoing = events
      .map(([, data]) => data)
      .filter((event) => /^response\.(created|in_progress|completed)$/.test(event.type))
    expect(echoing).toHaveLength(3)
    for (const event of echoing) expect(event.response).toMatchObject(settings)
  })
})

describe('the official SDKs parse the forced calls', () => {
  const openai = () => new OpenAI({ apiKey: 'sk-sim', baseURL: `${sim.url}/v1`, maxRetries: 0 })
  const anthropic = () => new Anthropic({ apiKey: 'sk-sim', baseURL: sim.url, maxRetries: 0 })

  test('openai: chat.completions.create with tool_choice "required"', async () => {
    const completion = await openai().chat.completions.create({
      model: 'sim-chat',
      messages: [{ role: 'user', content: messages[0].content }],
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: weatherSchema } }],
      tool_choice: 'required',
    })
    const [choice] = completion.choices
    expect(choice.finish_reason).toBe('tool_calls')
    const call = choice.message.tool_calls![0]
    expect(call.type === 'function' && call.function.name).toBe('get_weather')
    if (call.type !== 'function') throw new Error('not a function call')
    expect(JSON.parse(call.function.arguments)).toEqual({ city: await plainText(), days: 1 })
  })

  test('openai: responses.create with tool_choice "required"', async () => {
    const response = await openai().responses.create({
      model: 'sim-chat',
      input: messages[0].content,
      tools: [{ type: 'function', name: 'get_weather', parameters: weatherSchema, strict: true }],
      tool_choice: 'required',
    })
    const [item] = response.output
    expect(item.type).toBe('function_call')
    if (item.type !== 'function_call') throw new Error('not a function call')
    expect(item.name).toBe('get_weather')
    expect(JSON.parse(item.arguments)).toEqual({ city: await plainText(), days: 1 })
    expect(response.output_text).toBe('')
  })

  test('@anthropic-ai/sdk: messages.create and messages.stream().finalMessage() with tool_choice any', async () => {
    const client = anthropic()
    const params = {
      model: 'sim-claude',
      max_tokens: 200,
      messages: [{ role: 'user' as const, content: messages[0].content }],
      tools: [{ name: 'get_weather', input_schema: weatherSchema as { type: 'object' } }],
      tool_choice: { type: 'any' as const },
    }
    const created = await client.messages.create(params)
    const streamed = await client.messages.stream(params).finalMessage()
    const input = { city: await plainClaudeText(), days: 1 }
    for (const message of [created, streamed]) {
      expect(message.stop_reason).toBe('tool_use')
      expect(message.content).toHaveLength(1)
      expect(message.content[0]).toMatchObject({ type: 'tool_use', name: 'get_weather', input })
    }
    expect(streamed.usage.output_tokens).toBe(created.usage.output_tokens)
  })
})
