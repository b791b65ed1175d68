import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'

let sim: Simulator

beforeAll(async () => {
  sim = await startSimulator({ seed: 3 })
})
afterAll(async () => {
  await sim.stop()
})
beforeEach(() => {
  sim.configure({
    batchTurnaroundMs: 0,
    batchErrorRate: 0,
    batchExpireMs: null,
    batchCancelMs: 0,
    batchFailCode: null,
    requireApiKey: null,
  })
})

const anthropicHeaders = { 'anthropic-version': '2023-06-01', 'content-type': 'application/json' }

async function call(method: string, path: string, body?: unknown, headers = {}) {
  const init: RequestInit = { method, headers: { 'content-type': 'application/json', ...headers } }
  if (body !== undefined) init.body = JSON.stringify(body)
  const response = await fetch(`${sim.url}${path}`, init)
  const text = await response.text()
  let json: any = null
  try {
    json = JSON.parse(text)
  } catch {}
  return { status: response.status, text, json }
}

const chatLine = (customId: string, text: string, model = 'gpt-sim') =>
  JSON.stringify({
    custom_id: customId,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model, messages: [{ role: 'user', content: text }] },
  })

async function uploadJsonl(rows: string[]): Promise<string> {
  const form = new FormData()
  form.set('purpose', 'batch')
  form.set('file', new File([rows.join('\n') + '\n'], 'input.jsonl'))
  const response = await fetch(`${sim.url}/v1/files`, { method: 'POST', body: form })
  expect(response.status).toBe(200)
  const file = (await response.json()) as { id: string; purpose: string; bytes: number }
  expect(file.purpose).toBe('batch')
  return file.id
}

async function createOpenAI(rows: string[], metadata?: Record<string, string>) {
  const input_file_id = await uploadJsonl(rows)
  const body = {
    input_file_id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
    metadata,
  }
  const created = await call('POST', '/v1/batches', body)
  expect(created.status).toBe(200)
  return created.json
}

const jsonl = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((row) => JSON.parse(row))

describe('OpenAI Files + Batches', () => {
  test('a batch completes with an output file keyed by custom_id, usage in OpenAI shape', async () => {
    const batch = await createOpenAI([chatLine('mg-1', 'hello there'), chatLine('mg-2', 'again')], {
      mg_chunk: 'c1',
    })
    expect(batch.object).toBe('batch')
    expect(batch.metadata).toEqual({ mg_chunk: 'c1' })
    const read = await call('GET', `/v1/batches/${batch.id}`)
    expect(read.json.status).toBe('completed')
    expect(read.json.request_counts).toEqual({ total: 2, completed: 2, failed: 0 })
    expect(read.json.error_file_id).toBeNull()
    const output = await call('GET', `/v1/files/${read.json.output_file_id}/content`)
    const rows = jsonl(output.text)
    expect(rows.map((row) => row.custom_id).sort()).toEqual(['mg-1', 'mg-2'])
    const one = rows.find((row) => row.custom_id === 'mg-1')
    expect(one.response.status_code).toBe(200)
    expect(one.response.body.object).toBe('chat.completion')
    expect(one.response.body.usage.prompt_tokens).toBeGreaterThan(0)
    expect(one.response.body.usage.completion_tokens).toBeGreaterThan(0)
  })

  test('errored lines land in the error file with their status and body', async () => {
    sim.configure({ batchErrorRate: 1 })
    const batch = await createOpenAI([chatLine('mg-1', 'x'), chatLine('mg-2', 'y')])
    const read = await call('GET', `/v1/batches/${batch.id}`)
    expect(read.json.request_counts).toEqual({ total: 2, completed: 0, failed: 2 })
    expect(read.json.output_file_id).toBeNull()
    const errors = jsonl((await call('GET', `/v1/files/${read.json.error_file_id}/content`)).text)
    expect(errors.map((row) => row.response.status_code)).toEqual([500, 500])
    sim.configure({ batchErrorRate: 0 })
    const invalid = await createOpenAI([
      chatLine('mg-1', 'ok'),
      chatLine('mg-2', 'no [sim:batch-invalid]'),
    ])
    const after = await call('GET', `/v1/batches/${invalid.id}`)
    expect(after.json.request_counts).toEqual({ total: 2, completed: 1, failed: 1 })
    const rows = jsonl((await call('GET', `/v1/files/${after.json.error_file_id}/content`)).text)
    expect(rows[0].custom_id).toBe('mg-2')
    expect(rows[0].response.status_code).toBe(400)
    expect(rows[0].response.body.error.type).toBe('invalid_request_error')
  })

  test('expiry keeps the lines due before it and reports the rest batch_expired', async () => {
    sim.configure({ batchTurnaroundMs: 4000, batchExpireMs: 2100 })
    const rows = [1, 2, 3, 4].map((n) => chatLine(`mg-${n}`, `line ${n}`))
    const batch = await createOpenAI(rows)
    expect(batch.status).toBe('in_progress')
    await Bun.sleep(2200)
    const read = await call('GET', `/v1/batches/${batch.id}`)
    expect(read.json.status).toBe('expired')
    expect(read.json.request_counts).toEqual({ total: 4, completed: 2, failed: 0 })
    const output = jsonl((await call('GET', `/v1/files/${read.json.output_file_id}/content`)).text)
    expect(output.map((row) => row.custom_id).sort()).toEqual(['mg-1', 'mg-2'])
    const errors = jsonl((await call('GET', `/v1/files/${read.json.error_file_id}/content`)).text)
    expect(errors.map((row) => [row.custom_id, row.error.code])).toEqual([
      ['mg-3', 'batch_expired'],
      ['mg-4', 'batch_expired'],
    ])
  })

  test('cancel ends the batch cancelled; list pages newest first and finds it by metadata', async () => {
    sim.configure({ batchTurnaroundMs: 60_000, batchCancelMs: 0 })
    const batch = await createOpenAI([chatLine('mg-1', 'slow')], { mg_chunk: 'find-me' })
    await createOpenAI([chatLine('mg-1', 'other')], { mg_chunk: 'newer' })
    const page = await call('GET', '/v1/batches?limit=1')
    expect(page.json.data).toHaveLength(1)
    expect(page.json.data[0].metadata.mg_chunk).toBe('newer')
    expect(page.json.has_more).toBe(true)
    const next = await call('GET', `/v1/batches?limit=1&after=${page.json.last_id}`)
    expect(next.json.data[0].id).toBe(batch.id)
    const before = sim.batches().cancelled
    const cancelled = await call('POST', `/v1/batches/${batch.id}/cancel`)
    expect(cancelled.status).toBe(200)
    expect((await call('GET', `/v1/batches/${batch.id}`)).json.status).toBe('cancelled')
    expect(sim.batches().cancelled).toBe(before + 1)
    const again = await call('POST', `/v1/batches/${batch.id}/cancel`)
    expect(again.status).toBe(409)
  })

  test('a set failure code fails the batch with its errors; bad input is a 4xx', async () => {
    sim.configure({ batchFailCode: 'token_limit_exceeded' })
    const batch = await createOpenAI([chatLine('mg-1', 'x')])
    expect(batch.status).toBe('failed')
    expect(batch.errors.data[0].code).toBe('token_limit_exceeded')
    sim.configure({ batchFailCode: null })
    const mixed = await createOpenAI([chatLine('mg-1', 'x', 'a'), chatLine('mg-2', 'y', 'b')])
    expect(mixed.status).toBe('failed')
    expect(mixed.errors.data[0].code).toBe('mismatched_model')
    const missing = await call('POST', '/v1/batches', {
      input_file_id: 'file-nope',
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    })
    expect(missing.status).toBe(404)
    expect((await call('GET', '/v1/batches/batch_nope')).status).toBe(404)
  })
})

describe('Anthropic Message Batches', () => {
  const request = (customId: string, text: string) => ({
    custom_id: customId,
    params: { model: 'claude-sim', max_tokens: 64, messages: [{ role: 'user', content: text }] },
  })

  test('results by custom_id with usage in Anthropic shape; errored lines carry the envelope', async () => {
    sim.configure({ batchTurnaroundMs: 100 })
    const created = await call(
      'POST',
      '/v1/messages/batches',
      { requests: [request('mg-1', 'hello'), request('mg-2', 'bad [sim:batch-invalid]')] },
      anthropicHeaders,
    )
    expect(created.status).toBe(200)
    expect(created.json.type).toBe('message_batch')
    expect(created.json.processing_status).toBe('in_progress')
    const early = await call(
      'GET',
      `/v1/messages/batches/${created.json.id}/results`,
      undefined,
      anthropicHeaders,
    )
    expect(early.status).toBe(400)
    await Bun.sleep(150)
    const read = await call(
      'GET',
      `/v1/messages/batches/${created.json.id}`,
      undefined,
      anthropicHeaders,
    )
    expect(read.json.processing_status).toBe('ended')
    expect(read.json.request_counts).toEqual({
      processing: 0,
      succeeded: 1,
      errored: 1,
      canceled: 0,
      expired: 0,
    })
    const results = jsonl(
      await fetch(read.json.results_url, { headers: anthropicHeaders }).then((r) => r.text()),
    )
    const byId = new Map(results.map((row) => [row.custom_id, row.result]))
    expect(byId.get('mg-1').type).toBe('succeeded')
    expect(byId.get('mg-1').message.usage.input_tokens).toBeGreaterThan(0)
    expect(byId.get('mg-1').message.usage.output_tokens).toBeGreaterThan(0)
    expect(byId.get('mg-2').type).toBe('errored')
    expect(byId.get('mg-2').error.error.type).toBe('invalid_request_error')
  })

  test('cancel keeps what was done and reports the rest canceled; expiry reports expired', async () => {
    sim.configure({ batchTurnaroundMs: 60_000 })
    const created = await call(
      'POST',
      '/v1/messages/batches',
      { requests: [request('mg-1', 'a'), request('mg-2', 'b')] },
      anthropicHeaders,
    )
    const cancelled = await call(
      'POST',
      `/v1/messages/batches/${created.json.id}/cancel`,
      undefined,
      anthropicHeaders,
    )
    expect(cancelled.json.processing_status).toBe('ended')
    const rows = jsonl(
      (
        await call(
          'GET',
          `/v1/messages/batches/${created.json.id}/results`,
          undefined,
          anthropicHeaders,
        )
      ).text,
    )
    expect(rows.map((row) => row.result.type)).toEqual(['canceled', 'canceled'])
    sim.configure({ batchTurnaroundMs: 60_000, batchExpireMs: 0 })
    const expiring = await call(
      'POST',
      '/v1/messages/batches',
      { requests: [request('mg-1', 'a')] },
      anthropicHeaders,
    )
    const expired = await call(
      'GET',
      `/v1/messages/batches/${expiring.json.id}/results`,
      undefined,
      anthropicHeaders,
    )
    expect(jsonl(expired.text)[0].result.type).toBe('expired')
  })

  test('custom ids the API refuses and a missing version header are 400s', async () => {
    const bad = await call(
      'POST',
      '/v1/messages/batches',
      { requests: [request('has space', 'a')] },
      anthropicHeaders,
    )
    expect(bad.status).toBe(400)
    expect(bad.json.error.message).toContain('custom_id')
    const noVersion = await call('POST', '/v1/messages/batches', { requests: [request('a', 'a')] })
    expect(noVersion.status).toBe(400)
  })
})
