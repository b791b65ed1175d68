/**
 * The published JSON Schemas of native lines (docs/schemas/) are the ones line-schemas.ts makes,
 * and they describe what the gateway takes and writes: a file's lines validate against the input
 * schema, a finished batch's results (succeeded and failed lines) against the result schema.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import Ajv2020 from 'ajv/dist/2020'
import { lineJsonSchemas } from '../../src/schemas/line-schemas.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import {
  chatLine,
  embedLine,
  jsonl,
  startTestGateway,
  type TestGateway,
} from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

const dir = join(import.meta.dir, '..', '..', 'docs', 'schemas')
const published = (name: string) => JSON.parse(readFileSync(join(dir, name), 'utf8'))
const ajv = new Ajv2020({ strict: false, allErrors: true })

test('docs/schemas holds what line-schemas.ts makes (npm run schemas writes it)', () => {
  for (const [name, schema] of Object.entries(lineJsonSchemas())) {
    expect(published(name)).toEqual(JSON.parse(JSON.stringify(schema)))
  }
})

test('the input schema takes chat, embeddings and Responses lines and refuses a broken envelope', () => {
  const valid = ajv.compile(published('native-input-line.schema.json'))
  const responses = {
    custom_id: 'r-1',
    method: 'POST',
    url: '/v1/responses',
    body: { model: 'sim/chat', input: 'hello', max_output_tokens: 16 },
  }
  for (const line of [chatLine('c-1'), embedLine('e-1'), responses])
    expect({ line, ok: valid(line), errors: valid.errors }).toMatchObject({ ok: true })
  for (const broken of [
    { ...chatLine('c-2'), method: 'GET' },
    { ...chatLine('c-3'), url: '/v1/completions' },
    { ...chatLine(''), custom_id: '' },
    { method: 'POST', url: '/v1/chat/completions', body: chatLine('x').body },
  ])
    expect(valid(broken)).toBe(false)
})

describe('a finished batch against the result schema', () => {
  let sim: Simulator
  let gw: TestGateway
  beforeAll(async () => {
    sim = await startSimulator({ latencyMs: 5 })
    gw = await startTestGateway({
      upstreams: { openai: `${sim.url}/v1` },
      env: { MULTIGRID_POLL_MS: '50' },
    })
  })
  afterAll(async () => {
    await gw.stop()
    await sim.stop()
  })

  test('every result line, succeeded or failed, validates', async () => {
    const { key } = await gw.newAccount('1')
    // Asked for JSON and answered otherwise by the simulator: a failed line with its error.
    const lines = [
      chatLine('ok-1'),
      chatLine('bad-1', 'hello [sim:not_json]', { response_format: { type: 'json_object' } }),
      chatLine('ok-2'),
    ]
    const submitted = await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
    expect(submitted.status).toBe(201)
    const { id } = (await submitted.json()) as { id: string }
    await waitFor(
      'the batch to end',
      async () => {
        const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
          status: string
        }
        return FINAL_BATCH.includes(batch.status) ? batch : null
      },
      30_000,
    )
    const text = await (await gw.request(`/v1/batches/${id}/results`, key)).text()
    const rows = text
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as { status: string })
    expect(rows).toHaveLength(3)
    const valid = ajv.compile(published('native-result-line.schema.json'))
    for (const row of rows)
      expect({ row, ok: valid(row), errors: valid.errors }).toMatchObject({ ok: true })
    expect(rows.map((row) => row.status)).toEqual(['succeeded', 'failed', 'succeeded'])
  })
})
