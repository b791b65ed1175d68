/**
 * The answers of a real gateway, over HTTP with the simulator upstream, validate against the
 * response schemas of its own GET /openapi.json: a batch submitted, completed, listed and read
 * back with its results; a quote; a refusal; usage; the admin API; webhooks; the OpenAI facade's
 * files and batches; the Anthropic API's messages and message batches; the live endpoints.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { openApiChecker, type OpenApiDocument } from '../helpers/openapi-check.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

let sim: Simulator
let gw: TestGateway
let key = ''
let check: ReturnType<typeof openApiChecker>

beforeAll(async () => {
  sim = await startSimulator()
  gw = await startTestGateway({
    upstreams: { openai: `${sim.url}/v1` },
    env: { MULTIGRID_POLL_MS: '50', MULTIGRID_WEBHOOK_ALLOW_PRIVATE: 'true' },
  })
  ;({ key } = await gw.newAccount('5'))
  const document = (await (await fetch(`${gw.url}/openapi.json`)).json()) as OpenApiDocument
  check = openApiChecker(document)
})
afterAll(async () => {
  await gw?.stop()
  await sim?.stop()
})

/** The answer's status and JSON, checked against the document's schema for that status. */
async function answer(operation: string, response: Response, expected: number) {
  const body = await response.json()
  expect({ status: response.status, body }).toMatchObject({ status: expected })
  expect(check.problems(operation, expected, body)).toEqual([])
  expect(check.missingHeaders(operation, expected, response.headers)).toEqual([])
  return body as Record<string, unknown>
}

/** The first `data:` of an event stream, as JSON; the stream is then let go. */
async function firstEventData(response: Response): Promise<Record<string, unknown>> {
  const reader = response.body!.getReader()
  let text = ''
  for (;;) {
    const next = await reader.read()
    if (next.done) break
    text += new TextDecoder().decode(next.value)
    const data = /^data: (.*)$/m.exec(text)
    if (data && text.includes('\n\n')) {
      await reader.cancel()
      return JSON.parse(data[1]!)
    }
  }
  throw new Error(`no event in ${JSON.stringify(text)}`)
}

/** A request body, first checked against the document's schema for it: the document takes what the route takes. */
function sent<T>(operation: string, body: T): T {
  expect(check.requestProblems(operation, body)).toEqual([])
  return body
}

const refusal = async (operation: string, response: Response) => {
  expect(response.status).toBeGreaterThanOrEqual(400)
  expect(check.refusalProblems(operation, response.status, await response.json())).toEqual([])
}

test('a native batch: quote, submit, read, list, results, events, retry, refusals', async () => {
  const file = [chatLine('a'), chatLine('b'), chatLine('c', 'hello', {}, 'sim/refused')]
  for (const line of file) expect(check.componentProblems('NativeInputLine', line)).toEqual([])
  const lines = jsonl(file)
  const quoted = await gw.request('/v1/batches?dry_run=true', key, { method: 'POST', body: lines })
  await answer('POST /v1/batches', quoted, 200)
  const submitted = await answer(
    'POST /v1/batches',
    await gw.request('/v1/batches?name=doc', key, { method: 'POST', body: lines }),
    201,
  )
  const id = String(submitted.id)
  await waitFor('the batch to end', async () => {
    const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as { status: string }
    return FINAL_BATCH.includes(batch.status)
  })
  await answer('GET /v1/batches/{id}', await gw.request(`/v1/batches/${id}`, key), 200)
  const list = await answer('GET /v1/batches', await gw.request('/v1/batches?limit=2', key), 200)
  expect((list.data as unknown[]).length).toBeGreaterThan(0)

  const results = await gw.request(`/v1/batches/${id}/results`, key)
  expect(results.status).toBe(200)
  expect(check.missingHeaders('GET /v1/batches/{id}/results', 200, results.headers)).toEqual([])
  const text = await results.text()
  expect(text.split('\n').filter(Boolean)).toHaveLength(3)
  expect(check.lineProblems('GET /v1/batches/{id}/results', 200, text)).toEqual([])
  const inputs = await (await gw.request(`/v1/batches/${id}/results?format=input`, key)).text()
  expect(check.lineProblems('GET /v1/batches/{id}/results', 200, inputs)).toEqual([])

  // The progress stream's events carry Batch objects, as the document says.
  const events = await gw.request(`/v1/batches/${id}/events`, key)
  expect(events.headers.get('content-type')).toContain('text/event-stream')
  const event = await firstEventData(events)
  expect(event.id).toBe(id)
  expect(check.componentProblems('Batch', event)).toEqual([])
  // The failed line again, as a child batch.
  await answer(
    'POST /v1/batches/{id}/retry',
    await gw.request(`/v1/batches/${id}/retry`, key, { method: 'POST' }),
    201,
  )

  // Refusals: an ended batch is not cancellable; a file with problems lists its issues.
  await refusal(
    'DELETE /v1/batches/{id}',
    await gw.request(`/v1/batches/${id}`, key, { method: 'DELETE' }),
  )
  const bad = await gw.request('/v1/batches', key, {
    method: 'POST',
    body: jsonl([{ ...chatLine('x'), body: { model: 'sim/chat', messages: [], max_tokens: '3' } }]),
  })
  expect(bad.status).toBe(400)
  const envelope = await bad.json()
  expect(envelope.issues.length).toBeGreaterThan(0)
  expect(check.refusalProblems('POST /v1/batches', 400, envelope)).toEqual([])
  await refusal('GET /v1/batches/{id}', await gw.request('/v1/batches/batch_none', key))
  await refusal('GET /v1/batches', await gw.request('/v1/batches', null))
})

test('usage, models, the live endpoints', async () => {
  const today = new Date().toISOString().slice(0, 10)
  for (const group of ['day', 'model', 'provider'])
    await answer(
      'GET /v1/usage',
      await gw.request(`/v1/usage?from=${today}&to=${today}&group_by=${group}`, key),
      200,
    )
  await refusal('GET /v1/usage', await gw.request('/v1/usage?from=yesterday&to=today', key))
  await answer('GET /v1/models', await gw.request('/v1/models', key), 200)
  await answer('GET /openai/v1/models', await gw.request('/openai/v1/models', key), 200)
  const chat = { model: 'sim/chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 }
  const post = (path: string, body: unknown) =>
    gw.request(path, key, {
      method: 'POST',
      body: JSON.stringify(sent(`POST ${path}`, body)),
      headers: { 'content-type': 'application/json' },
    })
  await answer('POST /v1/chat/completions', await post('/v1/chat/completions', chat), 200)
  await answer(
    'POST /v1/embeddings',
    await post('/v1/embeddings', { model: 'sim/embed', input: 'hi' }),
    200,
  )
  await answer(
    'POST /v1/responses',
    await post('/v1/responses', { model: 'sim/chat', input: 'hi', max_output_tokens: 16 }),
    200,
  )
  await answer('GET /healthz', await fetch(`${gw.url}/healthz`), 200)
  await answer('GET /readyz', await fetch(`${gw.url}/readyz`), 200)
})

test('the admin API: account, credit, settings, keys', async () => {
  const created = await answer(
    'POST /admin/v1/accounts',
    await gw.admin('/accounts', {
      method: 'POST',
      body: sent('POST /admin/v1/accounts', { name: 'doc', credit_usd: '1' }),
    }),
    201,
  )
  const id = String(created.id)
  await answer('GET /admin/v1/accounts/{id}', await gw.admin(`/accounts/${id}`), 200)
  await answer(
    'POST /admin/v1/accounts/{id}/credits',
    await gw.admin(`/accounts/${id}/credits`, {
      method: 'POST',
      body: sent('POST /admin/v1/accounts/{id}/credits', { amount_usd: '2.5' }),
    }),
    200,
  )
  await answer(
    'PATCH /admin/v1/accounts/{id}',
    await gw.admin(`/accounts/${id}`, {
      method: 'PATCH',
      body: sent('PATCH /admin/v1/accounts/{id}', { daily_spend_limit_usd: '3' }),
    }),
    200,
  )
  const made = await answer(
    'POST /admin/v1/accounts/{id}/keys',
    await gw.admin(`/accounts/${id}/keys`, {
      method: 'POST',
      body: sent('POST /admin/v1/accounts/{id}/keys', { scopes: ['read'] }),
    }),
    201,
  )
  await answer(
    'DELETE /admin/v1/keys/{id}',
    await gw.admin(`/keys/${made.id}`, { method: 'DELETE' }),
    200,
  )
  await answer(
    'GET /admin/v1/accounts/{id}/adapters',
    await gw.admin(`/accounts/${id}/adapters`),
    200,
  )
  await refusal('GET /admin/v1/accounts/{id}', await gw.admin('/accounts/acct_none'))
  // What the document refuses, the route refuses: a credit as a number, an unknown field.
  for (const bad of [
    { name: 'x', credit_usd: 5 },
    { name: 'x', colour: 'red' },
  ]) {
    expect(check.requestProblems('POST /admin/v1/accounts', bad).length).toBeGreaterThan(0)
    await refusal(
      'POST /admin/v1/accounts',
      await gw.admin('/accounts', { method: 'POST', body: bad }),
    )
  }
})

test('webhooks: create, list, enable, deliveries, delete', async () => {
  const post = (path: string, body?: unknown) =>
    gw.request(path, key, {
      method: 'POST',
      ...(body
        ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }
        : {}),
    })
  const created = await answer(
    'POST /v1/webhooks',
    await post(
      '/v1/webhooks',
      sent('POST /v1/webhooks', { url: 'http://127.0.0.1:9/hook', events: ['batch.completed'] }),
    ),
    201,
  )
  const id = String(created.id)
  await answer('GET /v1/webhooks', await gw.request('/v1/webhooks', key), 200)
  await answer('POST /v1/webhooks/{id}/enable', await post(`/v1/webhooks/${id}/enable`), 200)
  await answer(
    'GET /v1/webhooks/{id}/deliveries',
    await gw.request(`/v1/webhooks/${id}/deliveries`, key),
    200,
  )
  await answer(
    'DELETE /v1/webhooks/{id}',
    await gw.request(`/v1/webhooks/${id}`, key, { method: 'DELETE' }),
    200,
  )
  await refusal('POST /v1/webhooks', await post('/v1/webhooks', { url: 'ftp://x' }))
})

test('the OpenAI facade: a file uploaded, a batch run, its output file, the lists', async () => {
  const form = new FormData()
  form.append('purpose', 'batch')
  form.append(
    'file',
    new Blob([jsonl([chatLine('a'), chatLine('b', 'hello', {}, 'sim/refused')])]),
    'in.jsonl',
  )
  const file = await answer(
    'POST /openai/v1/files',
    await gw.request('/openai/v1/files', key, { method: 'POST', body: form }),
    200,
  )
  const create = {
    input_file_id: file.id,
    endpoint: '/v1/chat/completions',
    completion_window: '24h',
  }
  const batch = await answer(
    'POST /openai/v1/batches',
    await gw.request('/openai/v1/batches', key, {
      method: 'POST',
      body: JSON.stringify(sent('POST /openai/v1/batches', create)),
      headers: { 'content-type': 'application/json' },
    }),
    200,
  )
  const ended = await waitFor('the facade batch to end', async () => {
    const read = await gw.request(`/openai/v1/batches/${batch.id}`, key)
    const body = (await read.clone().json()) as { status: string }
    return FINAL_BATCH.includes(body.status) ? read : null
  })
  const done = await answer('GET /openai/v1/batches/{id}', ended, 200)
  await answer('GET /openai/v1/batches', await gw.request('/openai/v1/batches', key), 200)
  await answer('GET /openai/v1/files', await gw.request('/openai/v1/files', key), 200)
  for (const fileId of [done.output_file_id, done.error_file_id]) {
    expect(typeof fileId).toBe('string')
    await answer(
      'GET /openai/v1/files/{id}',
      await gw.request(`/openai/v1/files/${fileId}`, key),
      200,
    )
    const content = await (await gw.request(`/openai/v1/files/${fileId}/content`, key)).text()
    expect(content.length).toBeGreaterThan(0)
    expect(check.lineProblems('GET /openai/v1/files/{id}/content', 200, content)).toEqual([])
  }
  const upload = await (await gw.request(`/openai/v1/files/${file.id}/content`, key)).text()
  expect(check.lineProblems('GET /openai/v1/files/{id}/content', 200, upload)).toEqual([])
  await refusal(
    'POST /openai/v1/batches/{id}/cancel',
    await gw.request(`/openai/v1/batches/${batch.id}/cancel`, key, { method: 'POST' }),
  )
  await answer(
    'DELETE /openai/v1/files/{id}',
    await gw.request(`/openai/v1/files/${file.id}`, key, { method: 'DELETE' }),
    200,
  )
})

test('the Anthropic API: a message, a count, a message batch and its results, the models', async () => {
  const headers = { 'x-api-key': key, 'content-type': 'application/json' }
  const post = (path: string, body: unknown) =>
    fetch(`${gw.url}/anthropic/v1${path}`, {
      method: 'POST',
      headers,
      body: JSON.stringify(sent(`POST /anthropic/v1${path}`, body)),
    })
  const params = { model: 'sim/chat', max_tokens: 16, messages: [{ role: 'user', content: 'hi' }] }
  await answer('POST /anthropic/v1/messages', await post('/messages', params), 200)
  const { max_tokens: _, ...count } = params
  await answer(
    'POST /anthropic/v1/messages/count_tokens',
    await post('/messages/count_tokens', count),
    200,
  )
  const created = await answer(
    'POST /anthropic/v1/messages/batches',
    await post('/messages/batches', {
      requests: [
        { custom_id: 'one', params },
        { custom_id: 'two', params: { ...params, model: 'sim/refused' } },
      ],
    }),
    200,
  )
  const read = (path: string, init?: RequestInit) =>
    fetch(`${gw.url}/anthropic/v1/messages/batches${path}`, { headers, ...init })
  await waitFor('the message batch to end', async () => {
    const batch = (await (await read(`/${created.id}`)).json()) as { processing_status: string }
    return batch.processing_status === 'ended'
  })
  await answer('GET /anthropic/v1/messages/batches/{id}', await read(`/${created.id}`), 200)
  await answer('GET /anthropic/v1/messages/batches', await read(''), 200)
  const results = await read(`/${created.id}/results`)
  expect(results.status).toBe(200)
  const text = await results.text()
  expect(text.split('\n').filter(Boolean)).toHaveLength(2)
  expect(
    check.lineProblems(
      'GET /anthropic/v1/messages/batches/{id}/results',
      200,
      text,
      'application/x-jsonl',
    ),
  ).toEqual([])
  await refusal(
    'POST /anthropic/v1/messages/batches/{id}/cancel',
    await read(`/${created.id}/cancel`, { method: 'POST' }),
  )
  await answer(
    'DELETE /anthropic/v1/messages/batches/{id}',
    await read(`/${created.id}`, { method: 'DELETE' }),
    200,
  )
  await refusal('GET /anthropic/v1/messages/batches/{id}', await read('/msgbatch_none'))
  const models = (path: string) => fetch(`${gw.url}/anthropic/v1/models${path}`, { headers })
  await answer('GET /anthropic/v1/models', await models('?limit=2'), 200)
  await answer('GET /anthropic/v1/models/{id}', await models('/sim%2Fchat'), 200)
  await refusal('GET /anthropic/v1/models/{id}', await models('/sim%2Fnone'))
})
