/**
 * Batch lines with `"url": "/v1/responses"` (docs/clients/responses.md), native and through the facade's endpoint
 * `/v1/responses`: validated up front by the translation they run with, run as chat calls on any
 * offering, their results in the Response object's shape and billed.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import OpenAI, { toFile } from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { contractProblems } from '../helpers/openai-contract.ts'
import { waitFor } from '../helpers/wait.ts'

let sim: Simulator
let gw: TestGateway

beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1 })
  gw = await startTestGateway({
    upstreams: { openai: `${sim.url}/v1`, anthropic: sim.url },
    env: { MULTIGRID_POLL_MS: '50' },
  })
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

const responsesLine = (id: string, model: string, body: Record<string, unknown> = {}) => ({
  custom_id: id,
  method: 'POST',
  url: '/v1/responses',
  body: {
    model,
    instructions: 'Answer briefly.',
    input: `Question ${id}`,
    max_output_tokens: 64,
    ...body,
  },
})

interface ResultLine {
  custom_id: string
  status: string
  cost_usd: string
  response: {
    body: {
      object: string
      status: string
      output: { content: { text: string }[] }[]
      usage: { total_tokens: number }
    }
  }
}

test('native: Responses lines run on any offering, results are Response objects', async () => {
  const { key } = await gw.newAccount('5')
  const submitted = await gw.request('/v1/batches', key, {
    method: 'POST',
    headers: { 'content-type': 'application/jsonl' },
    body: jsonl([responsesLine('r-1', 'sim/chat'), responsesLine('r-2', 'sim/claude')]),
  })
  expect(submitted.status).toBe(201)
  const batch = (await submitted.json()) as { id: string; endpoint: string }
  expect(batch.endpoint).toBe('/v1/responses')
  await waitFor('the batch to complete', async () => {
    const read = (await (await gw.request(`/v1/batches/${batch.id}`, key)).json()) as {
      status: string
    }
    return read.status === 'completed'
  })
  const lines = (await (await gw.request(`/v1/batches/${batch.id}/results`, key)).text())
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as ResultLine)
  expect(lines.map((line) => line.custom_id)).toEqual(['r-1', 'r-2'])
  for (const line of lines) {
    expect(line.status).toBe('succeeded')
    expect(Number(line.cost_usd)).toBeGreaterThan(0)
    expect(line.response.body.object).toBe('response')
    expect(line.response.body.status).toBe('completed')
    expect(line.response.body.output[0].content[0].text.length).toBeGreaterThan(0)
    expect(line.response.body.usage.total_tokens).toBeGreaterThan(0)
  }
})

test("native: an answer that fails its text.format keeps the answer in the Response shape as the error's upstream, on any offering", async () => {
  const { key } = await gw.newAccount('5')
  const format = {
    text: {
      format: {
        type: 'json_schema',
        name: 'answer',
        schema: { type: 'object', properties: { a: { type: 'string' } } },
      },
    },
  }
  const submitted = await gw.request('/v1/batches', key, {
    method: 'POST',
    headers: { 'content-type': 'application/jsonl' },
    body: jsonl(
      ['sim/chat', 'sim/claude'].map((model) =>
        responsesLine(model, model, { ...format, input: '[sim:not_json] answer in prose' }),
      ),
    ),
  })
  expect(submitted.status).toBe(201)
  const { id } = (await submitted.json()) as { id: string }
  await waitFor('the batch to end', async () => {
    const read = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
      status: string
    }
    return read.status === 'failed'
  })
  const lines = (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
    .trim()
    .split('\n')
    .map(
      (line) =>
        JSON.parse(line) as { error: { code: string; upstream: ResultLine['response']['body'] } },
    )
  expect(lines.length).toBe(2)
  for (const { error } of lines) {
    expect(error.code).toBe('structured_output_invalid')
    expect(error.upstream.object).toBe('response')
    expect(error.upstream.output[0].content[0].text).toContain('prose')
  }
})

test('native: what a line cannot translate is an issue, nothing submitted', async () => {
  const { key } = await gw.newAccount('5')
  const response = await gw.request('/v1/batches', key, {
    method: 'POST',
    headers: { 'content-type': 'application/jsonl' },
    body: jsonl([
      responsesLine('ok', 'sim/chat'),
      responsesLine('stored', 'sim/chat', { store: true }),
      responsesLine('reasoning', 'sim/chat', { reasoning: { effort: 'low' } }),
      responsesLine('long', 'sim/chat', { max_output_tokens: 999_999 }),
      responsesLine('unbounded', 'sim/chat', {
        max_output_tokens: undefined,
        text: { format: { type: 'json_object' } },
      }),
      responsesLine('any-json', 'sim/claude', { text: { format: { type: 'json_object' } } }),
    ]),
  })
  expect(response.status).toBe(400)
  const body = (await response.json()) as {
    issues: { line: number; path: string; fix: string }[]
  }
  expect(body.issues.map((issue) => [issue.line, issue.path])).toEqual([
    [2, 'body.store'],
    [3, 'body.reasoning'],
    [4, 'body.max_output_tokens'],
    [5, 'body.max_output_tokens'],
    [6, 'body.text.format.type'],
  ])
  // The fixes in the Responses body's own terms.
  expect(body.issues[3].fix).toStartWith('set max_output_tokens to the most tokens')
  expect(body.issues[4].fix).toStartWith(
    'use {"type": "json_schema", "name": "answer", "schema": {…}}',
  )
})

test("native: a schema's problems are named where a Responses body has it, text.format", async () => {
  const { key } = await gw.newAccount('5')
  const format = (schema: Record<string, unknown>) => ({
    text: { format: { type: 'json_schema', name: 'answer', schema } },
  })
  const properties = Object.fromEntries(
    Array.from({ length: 1001 }, (_, i) => [`p${i}`, { type: 'string' }]),
  )
  const response = await gw.request('/v1/batches', key, {
    method: 'POST',
    headers: { 'content-type': 'application/jsonl' },
    body: jsonl([
      responsesLine('wide', 'sim/chat', format({ type: 'object', properties })),
      responsesLine('backreference', 'sim/chat', format({ type: 'string', pattern: '(a)\\1' })),
    ]),
  })
  expect(response.status).toBe(400)
  const body = (await response.json()) as { issues: { line: number; path: string }[] }
  expect(body.issues.map((issue) => [issue.line, issue.path])).toEqual([
    [1, 'body.text.format.schema'],
    [2, 'body.text.format'],
  ])
  // The live call names the same field.
  const live = await gw.request('/v1/responses', key, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model: 'sim/chat',
      input: 'hi',
      ...format({ type: 'object', properties }),
    }),
  })
  expect(live.status).toBe(400)
  expect(((await live.json()) as { error: { param: string } }).error.param).toBe(
    'text.format.schema',
  )
})

test('facade: endpoint /v1/responses, output file in the Response shape, usage reported', async () => {
  const { key } = await gw.newAccount('5')
  const client = new OpenAI({ baseURL: `${gw.url}/openai/v1`, apiKey: key, maxRetries: 0 })
  const file = await client.files.create({
    file: await toFile(
      Buffer.from(
        jsonl([
          responsesLine('f-1', 'sim/chat', { input: 'Question f-1 [sim:cache read=3]' }),
          responsesLine('f-2', 'sim/chat', { input: 'Question f-2 [sim:cache read=3]' }),
        ]),
      ),
      'requests.jsonl',
    ),
    purpose: 'batch',
  })
  const created = await client.batches.create({
    input_file_id: file.id,
    endpoint: '/v1/responses',
    completion_window: '24h',
  })
  const done = await waitFor('the facade batch to complete', async () => {
    const batch = await client.batches.retrieve(created.id)
    return batch.status === 'completed' ? batch : null
  })
  expect(contractProblems('Batch', done)).toEqual([])
  expect(done.endpoint).toBe('/v1/responses')
  expect(done.usage!.total_tokens).toBeGreaterThan(0)
  expect(done.model).toBe('sim/chat')
  // Read from the Response bodies' own names (input_tokens_details), as the native batch counts them.
  const native = (await (await gw.request(`/v1/batches/${done.id}`, key)).json()) as {
    usage: { cached_input_tokens: number }
  }
  expect(native.usage.cached_input_tokens).toBe(6)
  expect(done.usage!.input_tokens_details.cached_tokens).toBe(6)
  const output = (await (await client.files.content(done.output_file_id!)).text())
    .trim()
    .split('\n')
    .map(
      (line) => JSON.parse(line) as { custom_id: string; response: { body: { object: string } } },
    )
  expect(output.map((line) => [line.custom_id, line.response.body.object])).toEqual([
    ['f-1', 'response'],
    ['f-2', 'response'],
  ])
})
