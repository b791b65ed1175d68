/**
 * Chat bodies OpenAI takes whose translation to Anthropic's Messages API Anthropic refused: each
 * one now goes upstream as a body Anthropic takes, meaning the same (shown by what the simulator
 * received, checked against Anthropic's rules), or, with no faithful translation, is refused by
 * the gateway itself at validation: a 400 live, a line-numbered issue in a batch.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { anthropicBodyProblem } from '../../src/simulator/anthropic-body-rules.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'

let sim: Simulator
let gw: TestGateway
let key: string
beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1, keepBodies: 10 })
  gw = await startTestGateway({
    upstreams: { openai: `${sim.url}/v1`, anthropic: sim.url },
    env: { MULTIGRID_DISPATCH: '0' },
  })
  key = (await gw.newAccount('10', { rate_limit_per_minute: 100_000 })).key
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

type Block = Record<string, unknown>
type Sent = {
  messages: { role: string; content: string | Block[] }[]
  system?: unknown
  tools?: unknown[]
  tool_choice?: Block
}

const live = (body: Record<string, unknown>) =>
  gw.request('/v1/chat/completions', key, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim/claude', max_tokens: 16, ...body }),
  })

/** A live call that must go through: the body the simulator received for it, as Anthropic's API gets it. */
async function sentFor(body: Record<string, unknown>): Promise<Sent> {
  const before = sim.received().length
  const answer = await live(body)
  expect(answer.status).toBe(200)
  const received = sim.received()
  expect(received.length).toBe(Math.min(before + 1, 10))
  const last = received.at(-1)!
  expect(last.path).toBe('/v1/messages')
  const sent = JSON.parse(last.text) as Sent
  expect(anthropicRefusals(sent)).toEqual([])
  return sent
}

/**
 * What Anthropic's Messages API would refuse in a body: the rules the simulator holds every body
 * to (src/simulator/anthropic-body-rules.ts), and beside them that tool_use ids are unique and
 * each tool_result answers one of them.
 */
function anthropicRefusals(sent: Sent): string[] {
  const problem = anthropicBodyProblem(sent as unknown as Record<string, unknown>)
  const refusals = problem ? [problem] : []
  const ids = new Set<string>()
  sent.messages.forEach((message, index) => {
    if (typeof message.content === 'string') return
    for (const block of message.content) {
      if (block.type === 'tool_use') {
        if (ids.has(String(block.id))) refusals.push(`tool_use ids must be unique`)
        ids.add(String(block.id))
      }
      if (block.type === 'tool_result' && !ids.has(String(block.tool_use_id)))
        refusals.push(`messages.${index}: unexpected tool_use_id ${String(block.tool_use_id)}`)
    }
  })
  return refusals
}

const weather = {
  type: 'function',
  function: { name: 'get_weather', parameters: { type: 'object', properties: {} } },
}
const hi = [{ role: 'user', content: 'Hi' }]

test('parallel_tool_calls false without tools sends no tool_choice; with tools it disables parallel calls', async () => {
  const bare = await sentFor({ messages: hi, parallel_tool_calls: false })
  expect('tool_choice' in bare).toBe(false)
  expect('tools' in bare).toBe(false)
  // An empty tools list offers none either.
  const empty = await sentFor({ messages: hi, tools: [], parallel_tool_calls: false })
  expect('tool_choice' in empty).toBe(false)
  expect('tools' in empty).toBe(false)
  const withTools = await sentFor({ messages: hi, tools: [weather], parallel_tool_calls: false })
  expect(withTools.tool_choice).toEqual({ type: 'auto', disable_parallel_tool_use: true })
})

test('tool_choice "none" with parallel_tool_calls false sends {type: "none"}', async () => {
  const sent = await sentFor({
    messages: hi,
    tools: [weather],
    tool_choice: 'none',
    parallel_tool_calls: false,
  })
  expect(sent.tool_choice).toEqual({ type: 'none' })
  const required = await sentFor({
    messages: hi,
    tools: [weather],
    tool_choice: 'required',
    parallel_tool_calls: false,
  })
  expect(required.tool_choice).toEqual({ type: 'any', disable_parallel_tool_use: true })
})

test("another model's tool-call ids are mapped to ones Anthropic takes, tool_use and tool_result alike", async () => {
  const call = (id: string, name: string) => ({
    id,
    type: 'function',
    function: { name, arguments: '{"city":"Oslo"}' },
  })
  const body = {
    tools: [weather, { type: 'function', function: { name: 'get_time' } }],
    messages: [
      { role: 'user', content: 'Weather and time in Oslo?' },
      {
        role: 'assistant',
        content: null,
        // Kimi's and others' ids; `a.b` maps onto `a_b`, which another call already has.
        tool_calls: [
          call('functions.get_weather:0', 'get_weather'),
          call('functions.get_time:1', 'get_time'),
          call('a.b', 'get_time'),
          call('a_b', 'get_time'),
        ],
      },
      { role: 'tool', tool_call_id: 'functions.get_weather:0', content: 'rain' },
      { role: 'tool', tool_call_id: 'functions.get_time:1', content: '09:00' },
      { role: 'tool', tool_call_id: 'a.b', content: '09:01' },
      { role: 'tool', tool_call_id: 'a_b', content: '09:02' },
    ],
  }
  const sent = await sentFor(body)
  expect(sent.messages[1]!.content).toEqual([
    {
      type: 'tool_use',
      id: 'functions_get_weather_0',
      name: 'get_weather',
      input: { city: 'Oslo' },
    },
    { type: 'tool_use', id: 'functions_get_time_1', name: 'get_time', input: { city: 'Oslo' } },
    { type: 'tool_use', id: 'a_b_2', name: 'get_time', input: { city: 'Oslo' } },
    { type: 'tool_use', id: 'a_b', name: 'get_time', input: { city: 'Oslo' } },
  ])
  expect(sent.messages[2]!.content).toEqual([
    { type: 'tool_result', tool_use_id: 'functions_get_weather_0', content: 'rain' },
    { type: 'tool_result', tool_use_id: 'functions_get_time_1', content: '09:00' },
    { type: 'tool_result', tool_use_id: 'a_b_2', content: '09:01' },
    { type: 'tool_result', tool_use_id: 'a_b', content: '09:02' },
  ])
  // Deterministic: the same conversation sent again carries the same ids.
  expect((await sentFor(body)).messages).toEqual(sent.messages)
})

test('a tool call whose arguments are "" goes as input {}; arguments that are not JSON are the gateway\'s refusal, said as such', async () => {
  const toolCall = (args: string) => ({
    tools: [weather],
    messages: [
      { role: 'user', content: 'Weather?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: args } },
        ],
      },
      // An empty result, too: sent without content.
      { role: 'tool', tool_call_id: 'call_1', content: '' },
    ],
  })
  const sent = await sentFor(toolCall(''))
  expect(sent.messages.slice(1)).toEqual([
    {
      role: 'assistant',
      content: [{ type: 'tool_use', id: 'call_1', name: 'get_weather', input: {} }],
    },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1' }] },
  ])
  const before = sim.received().map((r) => r.text)
  const refused = await live(toolCall('{"city":'))
  expect(refused.status).toBe(400)
  const { error } = (await refused.json()) as { error: { message: string; code: string } }
  expect(error.code).toBe('invalid_request')
  expect(error.message).toBe(
    'the gateway refused the request before sending it: messages[1]: tool call arguments are not valid JSON',
  )
  expect(sim.received().map((r) => r.text)).toEqual(before)
})

test('empty text parts and messages left with nothing are left out; the turns around them merge', async () => {
  const sent = await sentFor({
    messages: [
      { role: 'system', content: '' },
      { role: 'system', content: 'Be brief.' },
      {
        role: 'user',
        content: [
          { type: 'text', text: '' },
          { type: 'text', text: 'Hi' },
        ],
      },
      // An assistant turn that said nothing, and an empty user message: left out.
      { role: 'assistant', content: '' },
      { role: 'user', content: '' },
      { role: 'user', content: [{ type: 'text', text: ' ' }] },
      { role: 'assistant', content: null },
      { role: 'user', content: 'Still there?' },
      { role: 'assistant', content: [{ type: 'text', text: '' }] },
    ],
  })
  expect(sent.system).toBe('Be brief.')
  expect(sent.messages).toEqual([
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Hi' },
        { type: 'text', text: 'Still there?' },
      ],
    },
  ])
  // A final assistant message is a prefill: kept, its trailing whitespace (which Anthropic refuses) trimmed.
  const prefill = await sentFor({
    messages: [
      { role: 'user', content: 'Count to three.' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'One, ' },
          { type: 'text', text: '' },
        ],
      },
    ],
  })
  expect(prefill.messages.at(-1)).toEqual({ role: 'assistant', content: 'One,' })
  // Whitespace beside other text keeps the words apart, and Anthropic takes it there.
  const spaced = await sentFor({
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Hello' },
          { type: 'text', text: ' ' },
          { type: 'text', text: 'there' },
        ],
      },
    ],
  })
  expect(spaced.messages[0]!.content).toEqual([
    { type: 'text', text: 'Hello' },
    { type: 'text', text: ' ' },
    { type: 'text', text: 'there' },
  ])
})

const leftEmpty: [string, unknown[]][] = [
  ['only a system message', [{ role: 'system', content: 'Be brief.' }]],
  ['only an empty user message', [{ role: 'user', content: '' }]],
  [
    'a system message and empty ones',
    [
      { role: 'developer', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: '' }] },
      { role: 'assistant', content: null },
    ],
  ],
]

test('a body that leaves Anthropic no message is a 400 naming messages, sent nowhere', async () => {
  for (const [what, messages] of leftEmpty) {
    const before = sim.received().map((r) => r.text)
    const refused = await live({ messages })
    expect([what, refused.status]).toEqual([what, 400])
    const { error } = (await refused.json()) as { error: { param: string; message: string } }
    expect(error.param).toBe('messages')
    expect(error.message).toContain(
      'messages has no user or assistant message with content, which sim-anthropic',
    )
    expect(error.message).toContain('add a user message with text')
    expect(sim.received().map((r) => r.text)).toEqual(before)
  }
  // Streamed, the same refusal.
  const streamed = await live({ messages: leftEmpty[0]![1], stream: true })
  expect(streamed.status).toBe(400)
})

test('in a batch each such line is a line-numbered issue; a model served elsewhere takes the body', async () => {
  const lines = leftEmpty.map(([, messages], index) => ({
    ...chatLine(`empty-${index}`, '', {}, 'sim/claude'),
    body: { model: 'sim/claude', messages, max_tokens: 16 },
  }))
  const answer = await gw.request('/v1/batches', key, {
    method: 'POST',
    body: jsonl([
      chatLine('fine', 'hi', {}, 'sim/claude'),
      ...lines,
      // sim/chat has only an OpenAI-compatible offering: the body goes there as it is.
      { ...chatLine('openai-only'), body: { model: 'sim/chat', messages: leftEmpty[0]![1] } },
      // sim/multi may go to either: told how to route it away from Anthropic.
      { ...chatLine('multi'), body: { model: 'sim/multi', messages: leftEmpty[1]![1] } },
    ]),
  })
  expect(answer.status).toBe(400)
  const { issues } = (await answer.json()) as {
    issues: { line: number; path: string; message: string; fix: string }[]
  }
  expect(issues.map((i) => [i.line, i.path])).toEqual([
    [2, 'body.messages'],
    [3, 'body.messages'],
    [4, 'body.messages'],
    [6, 'body.messages'],
  ])
  expect(issues[0]!.fix).toBe(
    'add a user message with text, such as {"role": "user", "content": "Hello"}',
  )
  expect(issues[3]!.fix).toContain('"provider": {"ignore": ["sim-anthropic"]}')
  // Live, a model with no Anthropic offering takes it as OpenAI does.
  const openaiOnly = await live({ model: 'sim/chat', messages: leftEmpty[0]![1] })
  expect(openaiOnly.status).toBe(200)
})

test('temperature and top_p at their default of 1 are left out: Claude refuses the two together', async () => {
  const hello = [{ role: 'user', content: 'Hello' }]
  const both = (await sentFor({ messages: hello, temperature: 0.7, top_p: 1 })) as Block
  expect([both.temperature, both.top_p]).toEqual([0.7, undefined])
  const nucleus = (await sentFor({ messages: hello, temperature: 1, top_p: 0.9 })) as Block
  expect([nucleus.temperature, nucleus.top_p]).toEqual([undefined, 0.9])
})

test('tool_choice that asks for a call with no tools is the gateway refusal; an empty part keeps its cache breakpoint', async () => {
  const hello = [{ role: 'user', content: 'Hello' }]
  for (const choice of ['required', { type: 'function', function: { name: 'f' } }]) {
    const refused = await live({ messages: hello, tool_choice: choice })
    expect(refused.status).toBe(400)
    const { error } = (await refused.json()) as { error: { message: string } }
    expect(error.message).toStartWith('the gateway refused the request before sending it')
    expect(error.message).toContain('add tools or remove tool_choice')
  }
  const cached = await sentFor({
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'A long document.' },
          { type: 'text', text: '', cache_control: { type: 'ephemeral' } },
        ],
      },
    ],
  })
  expect(cached.messages[0]!.content).toEqual([
    { type: 'text', text: 'A long document.', cache_control: { type: 'ephemeral' } },
  ])
})
