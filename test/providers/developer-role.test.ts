/**
 * A chat call's `developer` message reaches a server that is not OpenAI's own (a pool, any
 * OpenAI-compatible API: no `responses_api`) as a `system` one, the role every chat server
 * knows: Qwen's chat template on vLLM refuses `developer`. OpenAI's own API (`responses_api`)
 * gets the body as it came. Whole and streamed, shown by what the simulator received.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { responsesCatalog } from '../helpers/catalog.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'

let sim: Simulator
let gw: TestGateway
let key: string

beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1, keepBodies: 10 })
  const catalog = responsesCatalog(sim.url)
  catalog.models.push({
    id: 'sim/own',
    endpoints: ['chat'],
    context_tokens: 32000,
    max_output_tokens: 4096,
    offerings: [
      {
        provider: 'sim-responses',
        upstream_model: 'own',
        input_usd_per_mtok: '1',
        output_usd_per_mtok: '2',
      },
    ],
  })
  gw = await startTestGateway({ catalog, env: { MULTIGRID_DISPATCH: '0' } })
  key = (await gw.newAccount('10')).key
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

const messages = [
  { role: 'developer', content: 'Answer in French.' },
  { role: 'user', content: 'Hi' },
]

/** The roles of the messages the simulator received for one live call. */
async function rolesSent(model: string, stream: boolean): Promise<string[]> {
  const answer = await gw.request('/v1/chat/completions', key, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model, max_tokens: 8, messages, stream }),
  })
  expect(answer.status).toBe(200)
  await answer.text()
  const sent = JSON.parse(sim.received().at(-1)!.text) as { messages: { role: string }[] }
  return sent.messages.map((message) => message.role)
}

test('a server that is not OpenAI’s own gets the developer message as a system one', async () => {
  expect(await rolesSent('sim/chat', false)).toEqual(['system', 'user'])
  expect(await rolesSent('sim/chat', true)).toEqual(['system', 'user'])
})

test('OpenAI’s own API gets it as it came', async () => {
  expect(await rolesSent('sim/own', false)).toEqual(['developer', 'user'])
  expect(await rolesSent('sim/own', true)).toEqual(['developer', 'user'])
})
