/**
 * A tool call without arguments, streamed from Claude, through the clients people use unchanged:
 * Anthropic streams its empty input as one empty JSON piece, and the call must still reach the
 * client as arguments "{}" (as OpenAI sends them, and as the answer that is not streamed says),
 * never "": the `openai` SDK's stream helpers parse the arguments of a strict tool, and a user's
 * own JSON.parse reads them.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'

let sim: Simulator
let gw: TestGateway
let client: OpenAI

beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1 })
  gw = await startTestGateway({
    upstreams: { openai: `${sim.url}/v1`, anthropic: sim.url },
    env: { MULTIGRID_DISPATCH: '0' },
  })
  const { key } = await gw.newAccount('10')
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 })
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

const noParameters = { type: 'object', properties: {}, additionalProperties: false }
const messages = [{ role: 'user' as const, content: 'What time is it?' }]

test('chat.completions.stream: the call to a tool without parameters has arguments "{}"', async () => {
  const tools = [
    {
      type: 'function' as const,
      function: { name: 'now', parameters: noParameters, strict: true },
    },
  ]
  const request = { model: 'sim/claude', max_tokens: 32, messages, tools }
  const streamed = await client.chat.completions
    .stream({ ...request, tool_choice: 'required' })
    .finalChatCompletion()
  const call = streamed.choices[0]!.message.tool_calls![0]!
  expect(call.type === 'function' && call.function).toMatchObject({ name: 'now', arguments: '{}' })
  // The same call not streamed says the same.
  const whole = await client.chat.completions.create({ ...request, tool_choice: 'required' })
  const wholeCall = whole.choices[0]!.message.tool_calls![0]!
  expect(wholeCall.type === 'function' && wholeCall.function.arguments).toBe('{}')
})

test('responses.stream: the function call to a tool without parameters has arguments "{}"', async () => {
  const final = await client.responses
    .stream({
      model: 'sim/claude',
      max_output_tokens: 32,
      input: 'What time is it?',
      tools: [{ type: 'function', name: 'now', parameters: noParameters, strict: true }],
      tool_choice: 'required',
    })
    .finalResponse()
  const call = final.output.find((item) => item.type === 'function_call')
  expect(call).toMatchObject({ type: 'function_call', name: 'now', arguments: '{}' })
})
