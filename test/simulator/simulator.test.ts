import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
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
  sim.resetStats()
})

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${sim.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  })
  return { status: response.status, headers: response.headers, text: await response.text() }
}

const anthropicHeaders = { 'anthropic-version': '2023-06-01' }

function sseData(text: string): Record<string, any>[] {
  return text
    .split('\n')
    .filter((line) => line.startsWith('data: ') && line !== 'data: [DONE]')
    .map((line) => JSON.parse(line.slice(6)))
}

describe('OpenAI chat completions', () => {
  const messages = [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'Summarise the ticket about the broken printer on floor 3, please.' },
  ]

  test('answers a deterministic reply with honest usage', async () => {
    const first = await post('/v1/chat/completions', { model: 'sim-chat', messages })
    const second = await post('/v1/chat/completions', { model: 'sim-chat', messages })
    expect(first.status).toBe(200)
    const body = JSON.parse(first.text)
    const content: string = body.choices[0].message.content
    expect(content).toStartWith('sim reply to Summarise the ticket about the broken pr #')
    expect(JSON.parse(second.text).choices[0].message.content).toBe(content)
    // 9 + 65 UTF-8 bytes → ceil(74 / 4) = 19, plus 3 per message.
    expect(body.usage).toEqual({ prompt_tokens: 25, completion_tokens: 11, total_tokens: 36 })
    expect(content.split(' ').length).toBe(11)
    expect(body.choices[0].finish_reason).toBe('stop')
  })

  test('honours n and max_tokens (or max_completion_tokens) per choice', async () => {
    for (const limit of [{ max_tokens: 4 }, { max_completion_tokens: 4 }]) {
      const { text } = await post('/v1/chat/completions', {
        model: 'sim-chat',
        messages,
        n: 3,
        ...limit,
      })
      const body = JSON.parse(text)
      expect(body.choices).toHaveLength(3)
      for (const choice of body.choices) {
        expect(choice.message.content).toBe('sim reply to Summarise')
        expect(choice.finish_reason).toBe('length')
      }
      expect(body.usage.completion_tokens).toBe(12)
    }
  })

  test('cuts at a stop sequence', async () => {
    const { text } = await post('/v1/chat/completions', {
      model: 'sim-chat',
      messages,
      stop: ['ticket'],
    })
    const body = JSON.parse(text)
    expect(body.choices[0].message.content).toBe('sim reply to Summarise the ')
    expect(body.choices[0].finish_reason).toBe('stop')
    expect(body.usage.completion_tokens).toBe(5)
  })

  test('streams chunks that add up to the plain answer, with usage when asked', async () => {
    const plain = JSON.parse(
      (await post('/v1/chat/completions', { model: 'sim-chat', messages })).text,
    )
    const streamed = await post('/v1/chat/completions', {
      model: 'sim-chat',
      messages,
      stream: true,
      stream_options: { include_usage: true },
    })
    expect(streamed.headers.get('content-type')).toStartWith('text/event-stream')
    expect(streamed.text.trimEnd()).toEndWith('data: [DONE]')
    const chunks = sseData(streamed.text)
    expect(chunks.every((chunk) => chunk.object === 'chat.completion.chunk')).toBe(true)
    const content = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? '').join('')
    expect(content).toBe(plain.choices[0].message.content)
    expect(chunks.at(-2)?.choices[0].finish_reason).toBe('stop')
    expect(chunks.at(-1)).toMatchObject({ choices: [], usage: plain.usage })

    const withoutUsage = sseData(
      (await post('/v1/chat/completions', { model: 'sim-chat', messages, stream: true })).text,
    )
    expect(withoutUsage.some((chunk) => chunk.usage)).toBe(false)
  })

  test('refuses a request without messages', async () => {
    const { status, text } = await post('/v1/chat/completions', { model: 'sim-chat', messages: [] })
    expect(status).toBe(400)
    expect(JSON.parse(text).error.type).toBe('invalid_request_error')
  })
})

describe('embeddings and models', () => {
  test('deterministic unit vectors with prompt_tokens', async () => {
    const request = { model: 'sim-embed', input: ['hello world', 'héllo'] }
    const first = JSON.parse((await post('/v1/embeddings', request)).text)
    const second = JSON.parse((await post('/v1/embeddings', request)).text)
    expect(first.data).toHaveLength(2)
    expect(first.data[0].embedding).toHaveLength(8)
    expect(first.data).toEqual(second.data)
    const norm = Math.hypot(...first.data[0].embedding)
    expect(norm).toBeCloseTo(1, 4)
    // ceil(11 / 4) + ceil(6 / 4)
    expect(first.usage).toEqual({ prompt_tokens: 5, total_tokens: 5 })
    const wide = JSON.parse((await post('/v1/embeddings', { ...request, dimensions: 16 })).text)
    expect(wide.data[0].embedding).toHaveLength(16)
  })

  test('GET /v1/models lists the models', async () => {
    const body = (await (await fetch(`${sim.url}/v1/models`)).json()) as { data: { id: string }[] }
    expect(body.data.map((model) => model.id)).toEqual(['sim-chat', 'sim-embed'])
  })
})

describe('Anthropic messages', () => {
  const request = {
    model: 'sim-claude',
    system: 'Be brief.',
    max_tokens: 100,
    messages: [
      {
        role: 'user',
        content: 'Summarise the ticket about the broken printer on floor 3, please.',
      },
    ],
  }

  test('same reply and token counts as the OpenAI shape of the same prompt', async () => {
    const { status, text } = await post('/v1/messages', request, anthropicHeaders)
    expect(status).toBe(200)
    const body = JSON.parse(text)
    expect(body).toMatchObject({ type: 'message', role: 'assistant', stop_reason: 'end_turn' })
    expect(body.content[0].text).toStartWith('sim reply to Summarise the ticket')
    expect(body.usage).toEqual({ input_tokens: 25, output_tokens: 11 })
  })

  test("refuses, in Anthropic's words, the bodies Anthropic refuses and OpenAI's chat takes", async () => {
    const user = (content: unknown) => ({ role: 'user', content })
    const refused: [string, Record<string, unknown>][] = [
      ['non-empty content', { messages: [user(''), user('hi')] }],
      ['non-empty content', { messages: [user([])] }],
      [
        'must be non-empty',
        {
          messages: [
            user([
              { type: 'text', text: 'a' },
              { type: 'text', text: '' },
            ]),
          ],
        },
      ],
      ['non-whitespace text', { messages: [user('   ')] }],
      ['non-whitespace text', { messages: [user([{ type: 'text', text: ' ' }])] }],
      ['trailing whitespace', { messages: [user('hi'), { role: 'assistant', content: 'Sure, ' }] }],
      ['while providing tools', { messages: [user('hi')], tool_choice: { type: 'auto' } }],
      [
        'Extra inputs',
        {
          messages: [user('hi')],
          tools: [{ name: 'f', input_schema: { type: 'object' } }],
          tool_choice: { type: 'none', disable_parallel_tool_use: true },
        },
      ],
      [
        'should match pattern',
        {
          messages: [
            user('hi'),
            {
              role: 'assistant',
              content: [{ type: 'tool_use', id: 'functions.f:0', name: 'f', input: {} }],
            },
            user([{ type: 'tool_result', tool_use_id: 'functions.f:0', content: 'ok' }]),
          ],
        },
      ],
    ]
    for (const [said, body] of refused) {
      const { status, text } = await post('/v1/messages', { ...request, ...body }, anthropicHeaders)
      expect([said, status]).toEqual([said, 400])
      expect(JSON.parse(text).error.message).toContain(said)
    }
    // Whitespace beside other text, and an empty final assistant turn (a prefill), are taken.
    for (const messages of [
      [
        user([
          { type: 'text', text: 'a' },
          { type: 'text', text: ' ' },
          { type: 'text', text: 'b' },
        ]),
      ],
      [user('hi'), { role: 'assistant', content: '' }],
    ]) {
      expect((await post('/v1/messages', { ...request, messages }, anthropicHeaders)).status).toBe(
        200,
      )
    }
  })

  test('stop_reason max_tokens and stop_sequence', async () => {
    const short = JSON.parse(
      (await post('/v1/messages', { ...request, max_tokens: 3 }, anthropicHeaders)).text,
    )
    expect(short.stop_reason).toBe('max_tokens')
    expect(short.content[0].text).toBe('sim reply to')
    expect(short.usage.output_tokens).toBe(3)
    const stopped = JSON.parse(
      (await post('/v1/messages', { ...request, stop_sequences: ['broken'] }, anthropicHeaders))
        .text,
    )
    expect(stopped).toMatchObject({ stop_reason: 'stop_sequence', stop_sequence: 'broken' })
    expect(stopped.content[0].text).toBe('sim reply to Summarise the ticket about the ')
  })

  test('streams message_start … message_stop with final usage in message_delta', async () => {
    const { text } = await post('/v1/messages', { ...request, stream: true }, anthropicHeaders)
    const names = text
      .split('\n')
      .filter((line) => line.startsWith('event: '))
      .map((line) => line.slice(7))
    expect(names[0]).toBe('message_start')
    expect(names.at(-2)).toBe('message_delta')
    expect(names.at(-1)).toBe('message_stop')
    const events = sseData(text)
    const content = events
      .filter((event) => event.type === 'content_block_delta')
      .map((event) => event.delta.text)
      .join('')
    expect(content).toStartWith('sim reply to Summarise')
    expect(events[0].message.usage.input_tokens).toBe(25)
    expect(events.find((event) => event.type === 'message_delta')?.usage.output_tokens).toBe(11)
  })

  test('requires max_tokens and the anthropic-version header', async () => {
    const { max_tokens: _omitted, ...withoutMax } = request
    const missingMax = await post('/v1/messages', withoutMax, anthropicHeaders)
    expect(missingMax.status).toBe(400)
    expect(JSON.parse(missingMax.text)).toMatchObject({
      type: 'error',
      error: { type: 'invalid_request_error' },
    })
    expect((await post('/v1/messages', request)).status).toBe(400)
  })
})

describe('keys and forced failures', () => {
  test('requireApiKey: Bearer for OpenAI, x-api-key for Anthropic', async () => {
    sim.configure({ requireApiKey: 'sim-key' })
    const chat = { model: 'sim-chat', messages: [{ role: 'user', content: 'hi' }] }
    expect((await post('/v1/chat/completions', chat)).status).toBe(401)
    expect(
      (await post('/v1/chat/completions', chat, { authorization: 'Bearer nope' })).status,
    ).toBe(401)
    expect(
      (await post('/v1/chat/completions', chat, { authorization: 'Bearer sim-key' })).status,
    ).toBe(200)
    const message = { model: 'sim-claude', max_tokens: 5, messages: chat.messages }
    expect((await post('/v1/messages', message, anthropicHeaders)).status).toBe(401)
    const keyed = { ...anthropicHeaders, 'x-api-key': 'sim-key' }
    expect((await post('/v1/messages', message, keyed)).status).toBe(200)
  })

  test('model fail-400 and ctx-overflow', async () => {
    const messages = [{ role: 'user', content: 'hi' }]
    const refused = await post('/v1/chat/completions', { model: 'fail-400-x', messages })
    expect(refused.status).toBe(400)
    expect(JSON.parse(refused.text).error.code).toBe('invalid_value')
    const tooLong = await post('/v1/chat/completions', { model: 'ctx-overflow', messages })
    expect(tooLong.status).toBe(400)
    expect(JSON.parse(tooLong.text).error.code).toBe('context_length_exceeded')
    const anthropic = await post(
      '/v1/messages',
      { model: 'ctx-overflow', max_tokens: 5, messages },
      anthropicHeaders,
    )
    expect(JSON.parse(anthropic.text).error.message).toContain('prompt is too long')
  })
})

describe('stats', () => {
  test('counts by path, status and prompt, and tracks in-flight', async () => {
    sim.configure({ latencyMs: 30 })
    const chat = (content: string) =>
      post('/v1/chat/completions', { model: 'sim-chat', messages: [{ role: 'user', content }] })
    await Promise.all([chat('a'), chat('a'), chat('b'), chat('c')])
    // The same prompt in Anthropic's shape counts against the same key.
    await post(
      '/v1/messages',
      { model: 'x', max_tokens: 5, messages: [{ role: 'user', content: 'a' }] },
      anthropicHeaders,
    )
    const stats = sim.stats()
    expect(stats.requests).toBe(5)
    expect(stats.byPath).toEqual({ '/v1/chat/completions': 4, '/v1/messages': 1 })
    expect(stats.byStatus).toEqual({ '200': 5 })
    expect(stats.maxPromptCount).toBe(3)
    expect(Object.values(stats.promptCounts).sort()).toEqual([1, 1, 3])
    expect(stats.peakInFlight).toBe(4)
    expect(stats.inFlight).toBe(0)
    expect(stats.arrivals).toHaveLength(5)
    sim.resetStats()
    expect(sim.stats()).toMatchObject({ requests: 0, promptCounts: {}, arrivals: [] })
  })

  test('reachable over HTTP for a simulator in another process', async () => {
    await post('/sim/config', { latencyMs: 1 })
    await post('/v1/embeddings', { model: 'e', input: 'x' })
    const stats = (await (await fetch(`${sim.url}/sim/stats`)).json()) as {
      byPath: Record<string, number>
    }
    expect(stats.byPath['/v1/embeddings']).toBe(1)
  })
})

describe('steering for billing tests', () => {
  const messages = [
    { role: 'user', content: 'Summarise the ticket about the broken printer on floor 3, please.' },
  ]
  afterAll(() => sim.configure({ usageFactor: 1, keepBodies: 0 }))

  test('usageFactor inflates the usage reported, in both dialects; keepBodies keeps what arrived', async () => {
    const honest = JSON.parse(
      (await post('/v1/chat/completions', { model: 'sim-chat', messages })).text,
    ).usage
    const claude = JSON.parse(
      (await post('/v1/messages', { model: 'c', max_tokens: 50, messages }, anthropicHeaders)).text,
    ).usage
    sim.configure({ usageFactor: 10, keepBodies: 2 })
    const inflated = JSON.parse(
      (await post('/v1/chat/completions', { model: 'sim-chat', messages })).text,
    ).usage
    expect(inflated.prompt_tokens).toBe(honest.prompt_tokens * 10)
    expect(inflated.completion_tokens).toBe(honest.completion_tokens * 10)
    const inflatedClaude = JSON.parse(
      (await post('/v1/messages', { model: 'c', max_tokens: 50, messages }, anthropicHeaders)).text,
    ).usage
    expect(inflatedClaude).toEqual({
      input_tokens: claude.input_tokens * 10,
      output_tokens: claude.output_tokens * 10,
    })
    await post('/v1/chat/completions', { model: 'sim-chat', messages, seed: 3 })
    const received = sim.received()
    expect(received.map((r) => r.path)).toEqual(['/v1/messages', '/v1/chat/completions'])
    expect(JSON.parse(received[1]!.text)).toEqual({ model: 'sim-chat', messages, seed: 3 })
  })
})
