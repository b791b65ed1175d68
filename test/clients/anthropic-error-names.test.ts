/**
 * A Messages request translated for a chat-only model and refused by the chat body's rules is
 * told in the caller's own names (docs/clients/anthropic-sdk.md): `messages[i].content[j]…`,
 * `tools[i].input_schema`, `output_config.format`, never the chat fields it never sent — live,
 * in count_tokens, and in a Message Batch's issues; the unchanged SDK reads them.
 */
import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { STORES, startTestGateway, type TestGateway } from '../helpers/gateway.ts'

/** The system prompt and the tool_result come first in chat: the indexes differ from the caller's. */
const withToolResult = (toolResult: Record<string, unknown>) => ({
  model: 'sim/chat',
  max_tokens: 64,
  system: 'Answer briefly.',
  messages: [
    { role: 'user', content: 'Weather in Paris?' },
    {
      role: 'assistant',
      content: [
        { type: 'text', text: 'Looking.' },
        { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } },
      ],
    },
    {
      role: 'user',
      content: [
        { type: 'text', text: 'Here:' },
        { type: 'tool_result', ...toolResult },
      ],
    },
  ],
})
const badTool = {
  model: 'sim/chat',
  max_tokens: 64,
  tools: [{ name: 'get_weather', input_schema: 5 }],
  messages: [{ role: 'user', content: 'Hi' }],
}
const badSchema = {
  model: 'sim/chat',
  max_tokens: 64,
  output_config: {
    format: {
      type: 'json_schema',
      schema: { type: 'object', properties: { a: { pattern: '(' } } },
    },
  },
  messages: [{ role: 'user', content: 'Hi' }],
}
/** Where each request is wrong, in the names it was sent in. */
const CASES: [Record<string, unknown>, string][] = [
  [withToolResult({ content: 'Sunny' }), 'messages[2].content[1].tool_use_id'],
  [badTool, 'tools[0].input_schema'],
]

for (const store of STORES) describe(store, () => suite(store))

function suite(store: (typeof STORES)[number]) {
  let sim: Simulator
  let gw: TestGateway
  let client: Anthropic

  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 1 })
    gw = await startTestGateway({
      store,
      upstreams: { openai: `${sim.url}/v1`, anthropic: sim.url },
    })
    const { key } = await gw.newAccount('10')
    client = new Anthropic({ baseURL: `${gw.url}/anthropic`, apiKey: key, maxRetries: 0 })
  })
  afterAll(async () => {
    await gw.stop()
    await sim.stop()
  })

  const refusal = async (call: Promise<unknown>) => {
    const error = await call.catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    return (error as { error: { error: { param: string; message: string } } }).error.error
  }

  test('create and count_tokens name the field as the caller sent it', async () => {
    for (const [params, path] of CASES) {
      const created = await refusal(client.messages.create(params as never))
      expect(created.param).toBe(path)
      expect(created.message).toStartWith(path)
      const counted = await refusal(client.messages.countTokens(params as never))
      expect(counted.param).toBe(path)
    }
    const schema = await refusal(client.messages.create(badSchema as never))
    expect(schema.param).toBe('output_config.format')
    expect(schema.message).toStartWith('output_config.format schema does not compile')
    expect(schema.message).not.toContain('response_format')
  })

  test("a Message Batch's issues name each request's own field", async () => {
    const requests = [...CASES.map(([params]) => params), badSchema].map((params, i) => ({
      custom_id: `r${i}`,
      params,
    }))
    const error = await client.messages.batches
      .create({ requests } as never)
      .catch((e: unknown) => e)
    expect(error).toBeInstanceOf(Anthropic.BadRequestError)
    const { issues } = (error as { error: { issues: { path: string; fix: string }[] } }).error
    expect(issues.map((issue) => issue.path)).toEqual([
      'requests[0].params.messages[2].content[1].tool_use_id',
      'requests[1].params.tools[0].input_schema',
      'requests[2].params.output_config.format',
    ])
    for (const issue of issues)
      expect(issue.fix).not.toMatch(/tool_call_id|function\.|response_format/)
  })
}
