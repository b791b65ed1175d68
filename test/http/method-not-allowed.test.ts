/**
 * A method a path does not take is a 405 whose `Allow` header and message name the methods it
 * does take (in the Anthropic shape under /anthropic); a path no route has stays a 404.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'

let gw: TestGateway
beforeAll(async () => {
  gw = await startTestGateway()
})
afterAll(() => gw.stop())

const ask = async (method: string, path: string) => {
  const response = await fetch(`${gw.url}${path}`, { method })
  return {
    status: response.status,
    allow: response.headers.get('allow'),
    body: await response.json(),
  }
}

test('a known path asked with a method it does not take answers 405, naming the ones it takes', async () => {
  const chat = await ask('GET', '/v1/chat/completions')
  expect(chat).toEqual({
    status: 405,
    allow: 'POST',
    body: {
      error: {
        message: 'GET is not allowed on /v1/chat/completions; it takes POST',
        type: 'invalid_request_error',
        param: null,
        code: 'method_not_allowed',
      },
    },
  })
  const batches = await ask('DELETE', '/v1/batches')
  expect([batches.status, batches.allow]).toEqual([405, 'GET, POST, HEAD'])
  // A path with a parameter, and a trailing slash, as routing reads them.
  const batch = await ask('PUT', '/v1/batches/b_x/')
  expect(batch.status).toBe(405)
  expect(batch.allow!.split(', ')).toContain('GET')
  expect(batch.body.error.message).toStartWith('PUT is not allowed on /v1/batches/b_x/; it takes ')
})

test('the OpenAI surface and a wildcard route answer the same way; HEAD is served where GET is', async () => {
  const files = await ask('PATCH', '/openai/v1/files')
  expect([files.status, files.allow]).toEqual([405, 'GET, POST, HEAD'])
  const model = await ask('POST', '/v1/models/vendor/some-model')
  expect([model.status, model.allow]).toEqual([405, 'GET, HEAD'])
  const head = await fetch(`${gw.url}/v1/models`, { method: 'HEAD' })
  expect(head.status).not.toBe(405)
})

test('under /anthropic the 405 comes in Anthropic’s error shape', async () => {
  const messages = await ask('GET', '/anthropic/v1/messages')
  expect(messages.status).toBe(405)
  expect(messages.allow).toBe('POST')
  expect(messages.body.type).toBe('error')
  expect(messages.body.error.type).toBe('invalid_request_error')
  expect(messages.body.error.message).toBe(
    'GET is not allowed on /anthropic/v1/messages; it takes POST',
  )
})

test('a path no route has is still a 404 unknown_route', async () => {
  const nothing = await ask('GET', '/v1/nothing-here')
  expect(nothing.status).toBe(404)
  expect(nothing.allow).toBeNull()
  expect(nothing.body.error.code).toBe('unknown_route')
})

test('what the OpenAI API has and the native API has not: a 404 that says where it is', async () => {
  for (const [method, path] of [
    ['POST', '/v1/files'],
    ['GET', '/v1/files/file-abc/content'],
  ]) {
    const files = await ask(method, path)
    expect([method, path, files.status, files.body.error.code]).toEqual([
      method,
      path,
      404,
      'unknown_route',
    ])
    expect(files.body.error.message).toStartWith(`there is no ${path} on the native API`)
    expect(files.body.error.message).toContain('/openai/v1')
  }
  const cancel = await ask('POST', '/v1/batches/batch_x/cancel')
  expect(cancel.status).toBe(404)
  expect(cancel.body.error.message).toStartWith(
    'the native API cancels a batch with DELETE /v1/batches/batch_x',
  )
  // The facade's own routes are where the message says.
  expect((await ask('POST', '/openai/v1/files')).body.error.code).not.toBe('unknown_route')
})

test('an SDK given a base URL one segment off: the 404 names the base URL to give it', async () => {
  for (const [method, path, base] of [
    ['POST', '/chat/completions', '<this gateway>/v1 '],
    ['GET', '/models', '<this gateway>/v1 '],
    ['POST', '/responses', '<this gateway>/v1 '],
    ['POST', '/files', '<this gateway>/openai/v1 '],
    ['POST', '/batches', '<this gateway>/openai/v1 '],
    ['GET', '/batches/batch_x', '<this gateway>/openai/v1 '],
    ['POST', '/openai/files', '<this gateway>/openai/v1 '],
    ['POST', '/openai/chat/completions', '<this gateway>/v1 '],
    ['POST', '/v1/messages', '<this gateway>/anthropic '],
    ['POST', '/v1/messages/batches', '<this gateway>/anthropic '],
    ['POST', '/v1/v1/messages', '<this gateway>/anthropic '],
  ]) {
    const wrong = await ask(method, path)
    expect([path, wrong.status, wrong.body.error.code]).toEqual([path, 404, 'unknown_route'])
    expect(wrong.body.error.message).toStartWith(`there is no ${path}: `)
    expect(wrong.body.error.message).toContain(`base URL ${base}`)
  }
  // With curl, `/batches` is the native API's `/v1/batches` without its /v1: the 404 says that too.
  expect((await ask('POST', '/batches')).body.error.message).toContain(
    'with curl, the native API is POST /v1/batches',
  )
  // The routes themselves are untouched.
  expect((await ask('GET', '/v1/models')).status).not.toBe(404)
  expect((await ask('GET', '/openai/v1/models')).status).not.toBe(404)
})

test('the admin API asked for where it is off (no MULTIGRID_ADMIN_TOKEN) says how to turn it on; where it is on, an unknown admin path is a plain 404', async () => {
  const off = await startTestGateway({
    env: { MULTIGRID_ADMIN_TOKEN: undefined } as unknown as Record<string, string>,
  })
  try {
    const response = await fetch(`${off.url}/admin/v1/accounts`, { method: 'POST', body: '{}' })
    expect(response.status).toBe(404)
    const { error } = (await response.json()) as { error: { code: string; message: string } }
    expect(error.code).toBe('unknown_route')
    expect(error.message).toContain('the admin API is off')
    expect(error.message).toContain('MULTIGRID_ADMIN_TOKEN')
  } finally {
    await off.stop()
  }
  const unknown = await ask('GET', '/admin/v1/nothing-here')
  expect(unknown.status).toBe(404)
  expect(unknown.body.error.message).toBe('no route for GET /admin/v1/nothing-here')
})

test('a path a newcomer gets one step wrong: the 404 names the one meant', async () => {
  for (const [method, path, meant] of [
    ['POST', '/v1/batch', 'did you mean /v1/batches?'],
    ['GET', '/v1/batch/batch_x/results', 'did you mean /v1/batches/batch_x/results?'],
    // MULTIGRID_URL or a base URL that already ends in /v1.
    ['GET', '/v1/v1/batches', 'the path has /v1 twice'],
    ['POST', '/v1/v1/chat/completions', 'the path has /v1 twice'],
  ]) {
    const wrong = await ask(method, path)
    expect([path, wrong.status, wrong.body.error.code]).toEqual([path, 404, 'unknown_route'])
    expect(wrong.body.error.message).toStartWith(`there is no ${path}: `)
    expect(wrong.body.error.message).toContain(meant)
  }
  expect((await ask('GET', '/v1/batches-x')).body.error.message).toBe(
    'no route for GET /v1/batches-x',
  )
})
