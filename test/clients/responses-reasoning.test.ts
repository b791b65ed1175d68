/**
 * A live Responses call passed through to a reasoning model (an offering with
 * `encrypted_reasoning`): the gateway sends it with store: false (nothing is stored upstream), so
 * it asks for the model's reasoning as encrypted content, which the caller sends back with its
 * next turn; OpenAI refuses a reasoning item it can neither look up nor decrypt. A model that does
 * not reason is not asked (OpenAI refuses the ask: "Encrypted content is not supported with this
 * model").
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { responsesCatalog } from '../helpers/catalog.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'

let sim: Simulator
let gw: TestGateway
let client: OpenAI

const offering = (upstream: string, reasons: boolean) => ({
  id: `sim/${upstream}`,
  endpoints: ['chat'],
  context_tokens: 32000,
  max_output_tokens: 4096,
  offerings: [
    {
      provider: 'sim-responses',
      upstream_model: upstream,
      input_usd_per_mtok: '1',
      output_usd_per_mtok: '2',
      ...(reasons && { max_tokens_param: 'max_completion_tokens', encrypted_reasoning: true }),
    },
  ],
})

beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1, keepBodies: 10 })
  // A provider that serves the Responses API itself: its calls pass through (docs/clients/responses.md).
  const catalog = responsesCatalog(sim.url)
  catalog.models.push(offering('reasoner', true), offering('plain', false))
  gw = await startTestGateway({ catalog, env: { MULTIGRID_DISPATCH: '0' } })
  const { key } = await gw.newAccount('10')
  client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: key, maxRetries: 0 })
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

/** The body the simulator received for the last call. */
const lastSent = () => JSON.parse(sim.received().at(-1)!.text) as Record<string, unknown>

test('a reasoning model is asked for its reasoning as encrypted content, beside what the caller included', async () => {
  await client.responses.create({ model: 'sim/reasoner', input: 'Hi', max_output_tokens: 16 })
  expect(lastSent()).toMatchObject({ store: false, include: ['reasoning.encrypted_content'] })
  await client.responses
    .stream({
      model: 'sim/reasoner',
      input: 'Hi',
      max_output_tokens: 16,
      include: ['message.output_text.logprobs'],
    })
    .finalResponse()
  expect(lastSent().include).toEqual([
    'message.output_text.logprobs',
    'reasoning.encrypted_content',
  ])
  // Asked already: once.
  await client.responses.create({
    model: 'sim/reasoner',
    input: 'Hi',
    max_output_tokens: 16,
    include: ['reasoning.encrypted_content'],
  })
  expect(lastSent().include).toEqual(['reasoning.encrypted_content'])
})

test('a model that does not reason is not asked: OpenAI would refuse the call', async () => {
  await client.responses.create({ model: 'sim/plain', input: 'Hi', max_output_tokens: 16 })
  const sent = lastSent()
  expect(sent.store).toBe(false)
  expect('include' in sent).toBe(false)
})
