/**
 * The facade's batch object says what is going on (docs/openai-facade.md, docs/open-models.md), read with the `openai`
 * package: OpenAI's `usage` and `model`, and `multigrid` (waiting, routing, cost); a 72-hour
 * window waits for a top-up by default, and says so. Every answer still validates against
 * OpenAI's published schema.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI, { toFile } from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { contractProblems } from '../helpers/openai-contract.ts'
import { waitFor } from '../helpers/wait.ts'

let sim: Simulator
let gw: TestGateway

beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1 })
  gw = await startTestGateway({
    upstreams: { openai: `${sim.url}/v1` },
    env: { MULTIGRID_POLL_MS: '50' },
  })
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

interface Extras {
  usage: {
    input_tokens: number
    input_tokens_details: { cached_tokens: number }
    output_tokens: number
    output_tokens_details: { reasoning_tokens: number }
    total_tokens: number
  }
  model: string | null
  multigrid: {
    waiting: { code: string; message: string } | null
    routing: { providers: Record<string, { succeeded: number }>; eta: number | null }
    cost_usd: string
    cost_ceiling_usd: string
  }
}

async function submit(client: OpenAI, lines: string, window: string) {
  const file = await client.files.create({
    file: await toFile(Buffer.from(lines), 'requests.jsonl'),
    purpose: 'batch',
  })
  return client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: window as '24h',
  })
}

test('usage, model and multigrid on a finished batch, within the OpenAI schema', async () => {
  const { key } = await gw.newAccount('10')
  const client = new OpenAI({ baseURL: `${gw.url}/openai/v1`, apiKey: key, maxRetries: 0 })
  const created = await submit(
    client,
    jsonl([chatLine('a', 'Hello there.'), chatLine('b', 'How are you?')]),
    '24h',
  )
  const done = await waitFor('the batch to complete', async () => {
    const batch = await client.batches.retrieve(created.id)
    return batch.status === 'completed' ? batch : null
  })
  expect(contractProblems('Batch', done)).toEqual([])
  const extras = done as unknown as Extras
  expect(extras.usage.input_tokens).toBeGreaterThan(0)
  expect(extras.usage.output_tokens).toBeGreaterThan(0)
  expect(extras.usage.total_tokens).toBe(extras.usage.input_tokens + extras.usage.output_tokens)
  expect(extras.usage.input_tokens_details.cached_tokens).toBe(0)
  expect(extras.usage.output_tokens_details.reasoning_tokens).toBe(0)
  expect(extras.model).toBe('sim/chat')
  expect(extras.multigrid.waiting).toBeNull()
  expect(extras.multigrid.routing.providers.sim.succeeded).toBe(2)
  expect(Number(extras.multigrid.cost_usd)).toBeGreaterThan(0)
  expect(Number(extras.multigrid.cost_ceiling_usd)).toBeGreaterThanOrEqual(
    Number(extras.multigrid.cost_usd),
  )
  const page = await client.batches.list()
  for (const item of page.data) expect(contractProblems('Batch', item)).toEqual([])
  expect((page.data[0] as unknown as Extras).usage.total_tokens).toBe(extras.usage.total_tokens)
})

test("model: one catalog model named by its id and an alias is that model's id", async () => {
  const { key } = await gw.newAccount('10')
  const client = new OpenAI({ baseURL: `${gw.url}/openai/v1`, apiKey: key, maxRetries: 0 })
  const created = await submit(
    client,
    jsonl([chatLine('a', 'Hello.'), chatLine('b', 'Hi.', {}, 'chat-small')]),
    '24h',
  )
  const done = await waitFor('the batch to complete', async () => {
    const batch = await client.batches.retrieve(created.id)
    return batch.status === 'completed' ? batch : null
  })
  expect((done as unknown as Extras).model).toBe('sim/chat')
  // Two models: none.
  const mixed = await submit(
    client,
    jsonl([chatLine('a', 'Hello.'), chatLine('b', 'Hi.', {}, 'sim/strict')]),
    '24h',
  )
  const ended = await waitFor('the mixed batch to complete', async () => {
    const batch = await client.batches.retrieve(mixed.id)
    return batch.status === 'completed' ? batch : null
  })
  expect((ended as unknown as Extras).model).toBeNull()
})

test('a 72-hour window waits for a top-up by default and shows why', async () => {
  const { key, accountId } = await gw.newAccount('0.000001')
  const client = new OpenAI({ baseURL: `${gw.url}/openai/v1`, apiKey: key, maxRetries: 0 })
  const lines = jsonl([chatLine('a', 'Hello there.')])
  const waiting = await submit(client, lines, '72h')
  expect(waiting.status).toBe('validating')
  expect(contractProblems('Batch', waiting)).toEqual([])
  const extras = waiting as unknown as Extras
  expect(extras.multigrid.waiting?.code).toBe('insufficient_credit')
  expect(extras.multigrid.waiting?.message.length).toBeGreaterThan(0)
  // A 24-hour window is refused at once, as on every admission path: 402, nothing stored.
  const listed = (await client.batches.list()).data.length
  const refused = await submit(client, lines, '24h').catch((e: unknown) => e)
  expect(refused).toBeInstanceOf(OpenAI.APIError)
  expect((refused as InstanceType<typeof OpenAI.APIError>).status).toBe(402)
  expect((refused as InstanceType<typeof OpenAI.APIError>).code).toBe('insufficient_quota')
  expect((await client.batches.list()).data.length).toBe(listed)
  // The deposit starts the waiting one.
  await gw.admin(`/accounts/${accountId}/credits`, { body: { amount_usd: '5' } })
  const done = await waitFor(
    'the waiting batch to run',
    async () => {
      const batch = await client.batches.retrieve(waiting.id)
      return batch.status === 'completed' ? batch : null
    },
    30_000,
  )
  expect((done as unknown as Extras).multigrid.waiting).toBeNull()
})
