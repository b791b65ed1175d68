/**
 * Isolation between accounts, and authentication, on every endpoint of both surfaces: another
 * account's ids are 404 exactly as if missing, a missing, malformed, unknown or revoked key is
 * 401 invalid_api_key, a key without the scope is 403 insufficient_permissions. And no response
 * or log line (at debug level) ever carries a key or, outside the owner's own reads, a prompt.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import {
  ADMIN_TOKEN,
  chatLine,
  jsonl,
  startTestGateway,
  STORES,
  type TestGateway,
} from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

/** In every prompt account A sends; it must never reach a log line or anyone else. */
const PROMPT = 'PROMPT-MARKER-5c1e9d the parcel never came'
/** The gateway's own provider key; an upstream below echoes it back in its 401s. */
const PROVIDER_KEY = 'sk-ant-test-secret'

type Scope = 'batches' | 'read' | 'inference' | 'any'

interface Endpoint {
  name: string
  method: string
  /** `{batch}`, `{file}`, `{fbatch}`, `{output}`, `{webhook}` stand for account A's ids. */
  path: string
  scope: Scope
  body?: (ids: Ids) => BodyInit
  json?: boolean
  /** Names one of A's ids in its body. */
  owned?: boolean
}

interface Ids {
  batch: string
  file: string
  fbatch: string
  output: string
  webhook: string
}

const chatBody = () =>
  JSON.stringify({
    model: 'sim/chat',
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: 8,
  })
const upload = () => {
  const form = new FormData()
  form.set('purpose', 'batch')
  form.set('file', new Blob([jsonl([chatLine('u-1', PROMPT)])]), 'mine.jsonl')
  return form
}

/**
 * Account A's webhook: a public address (no DNS asked), and only for an event no batch here
 * reaches, so nothing is ever sent off this machine.
 */
const WEBHOOK_URL = 'https://8.8.8.8/hook'
const WEBHOOK_EVENTS = ['batch.expired']

const ENDPOINTS: Endpoint[] = [
  {
    name: 'submit',
    method: 'POST',
    path: '/v1/batches',
    scope: 'batches',
    body: () => jsonl([chatLine('s-1', PROMPT)]),
  },
  { name: 'list batches', method: 'GET', path: '/v1/batches', scope: 'read' },
  { name: 'get batch', method: 'GET', path: '/v1/batches/{batch}', scope: 'read' },
  {
    name: 'get a facade batch natively',
    method: 'GET',
    path: '/v1/batches/{fbatch}',
    scope: 'read',
  },
  { name: 'cancel batch', method: 'DELETE', path: '/v1/batches/{batch}', scope: 'batches' },
  { name: 'results', method: 'GET', path: '/v1/batches/{batch}/results', scope: 'read' },
  {
    name: 'results as input',
    method: 'GET',
    path: '/v1/batches/{batch}/results?filter=succeeded&format=input',
    scope: 'read',
  },
  {
    name: 'live chat',
    method: 'POST',
    path: '/v1/chat/completions',
    scope: 'inference',
    body: chatBody,
    json: true,
  },
  {
    name: 'live embeddings',
    method: 'POST',
    path: '/v1/embeddings',
    scope: 'inference',
    body: () => JSON.stringify({ model: 'sim/embed', input: PROMPT }),
    json: true,
  },
  { name: 'models', method: 'GET', path: '/v1/models', scope: 'any' },
  {
    name: 'facade live chat',
    method: 'POST',
    path: '/openai/v1/chat/completions',
    scope: 'inference',
    body: chatBody,
    json: true,
  },
  {
    name: 'facade live embeddings',
    method: 'POST',
    path: '/openai/v1/embeddings',
    scope: 'inference',
    body: () => JSON.stringify({ model: 'sim/embed', input: PROMPT }),
    json: true,
  },
  { name: 'facade models', method: 'GET', path: '/openai/v1/models', scope: 'any' },
  { name: 'upload file', method: 'POST', path: '/openai/v1/files', scope: 'batches', body: upload },
  { name: 'list files', method: 'GET', path: '/openai/v1/files', scope: 'read' },
  { name: 'get file', method: 'GET', path: '/openai/v1/files/{file}', scope: 'read' },
  { name: 'file content', method: 'GET', path: '/openai/v1/files/{file}/content', scope: 'read' },
  { name: 'get output file', method: 'GET', path: '/openai/v1/files/{output}', scope: 'read' },
  {
    name: 'output file content',
    method: 'GET',
    path: '/openai/v1/files/{output}/content',
    scope: 'read',
  },
  { name: 'delete file', method: 'DELETE', path: '/openai/v1/files/{file}', scope: 'batches' },
  {
    name: 'facade create from a file',
    method: 'POST',
    path: '/openai/v1/batches',
    scope: 'batches',
    body: (ids) =>
      JSON.stringify({
        input_file_id: ids.file,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      }),
    json: true,
    owned: true,
  },
  { name: 'facade list batches', method: 'GET', path: '/openai/v1/batches', scope: 'read' },
  { name: 'facade get batch', method: 'GET', path: '/openai/v1/batches/{fbatch}', scope: 'read' },
  {
    name: 'facade get a native batch',
    method: 'GET',
    path: '/openai/v1/batches/{batch}',
    scope: 'read',
  },
  {
    name: 'facade cancel batch',
    method: 'POST',
    path: '/openai/v1/batches/{fbatch}/cancel',
    scope: 'batches',
  },
  {
    name: 'create webhook',
    method: 'POST',
    path: '/v1/webhooks',
    scope: 'batches',
    json: true,
    body: () => JSON.stringify({ url: WEBHOOK_URL, events: WEBHOOK_EVENTS }),
  },
  { name: 'list webhooks', method: 'GET', path: '/v1/webhooks', scope: 'batches' },
  {
    name: 'enable webhook',
    method: 'POST',
    path: '/v1/webhooks/{webhook}/enable',
    scope: 'batches',
  },
  { name: 'delete webhook', method: 'DELETE', path: '/v1/webhooks/{webhook}', scope: 'batches' },
  {
    name: 'webhook deliveries',
    method: 'GET',
    path: '/v1/webhooks/{webhook}/deliveries',
    scope: 'batches',
  },
]

/** The same ids with their random part changed: the same shape, owned by nobody. */
const missing = (ids: Ids): Ids => {
  const swap = (id: string) => id.replace(/[0-9a-f]{12}(?=[^0-9a-f]*$|-output$)/, '0123456789ab')
  return {
    batch: swap(ids.batch),
    file: swap(ids.file),
    fbatch: swap(ids.fbatch),
    output: swap(ids.output),
    webhook: swap(ids.webhook),
  }
}
const fill = (path: string, ids: Ids) =>
  path
    .replace('{batch}', ids.batch)
    .replace('{fbatch}', ids.fbatch)
    .replace('{file}', ids.file)
    .replace('{output}', ids.output)
    .replace('{webhook}', ids.webhook)

for (const storeKind of STORES) {
  describe(`isolation and authentication (${storeKind})`, () => {
    let sim: Simulator
    let echo: ReturnType<typeof Bun.serve>
    let gw: TestGateway
    const logLines: string[] = []
    /** Every answer seen, with whether its reader was account A reading its own data. */
    const answers: { what: string; own: boolean; status: number; text: string }[] = []
    const secrets: string[] = [ADMIN_TOKEN, PROVIDER_KEY]
    let a: { accountId: string; key: string; keyId: string }
    let b: { accountId: string; key: string; keyId: string }
    let ids: Ids
    /** Keys of account A that lack one scope each, and one that was revoked. */
    const without: Record<string, string> = {}
    let revoked: string

    async function call(
      what: string,
      endpoint: Endpoint,
      authorization: string | null,
      own: boolean,
      use: Ids = ids,
    ) {
      const headers: Record<string, string> = {}
      if (authorization !== null) headers.authorization = authorization
      if (endpoint.json) headers['content-type'] = 'application/json'
      const response = await fetch(`${gw.url}${fill(endpoint.path, use)}`, {
        method: endpoint.method,
        headers,
        body: endpoint.body?.(use),
      })
      const text = await response.text()
      answers.push({
        what: `${what}: ${endpoint.method} ${endpoint.path}`,
        own,
        status: response.status,
        text,
      })
      return {
        status: response.status,
        text,
        json: () => JSON.parse(text) as { error: Record<string, unknown> },
      }
    }

    async function adminKey(accountId: string, scopes?: string[]) {
      const response = await gw.admin(`/accounts/${accountId}/keys`, {
        body: scopes ? { scopes } : {},
      })
      const key = (await response.json()) as { id: string; key: string }
      secrets.push(key.key)
      return key
    }

    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 2 })
      // An Anthropic-shaped upstream that refuses the gateway's key and quotes it back, as some do.
      echo = Bun.serve({
        port: 0,
        hostname: '127.0.0.1',
        fetch: (request) =>
          Response.json(
            {
              type: 'error',
              error: {
                type: 'authentication_error',
                message: `invalid x-api-key: ${request.headers.get('x-api-key')}`,
              },
            },
            { status: 401 },
          ),
      })
      gw = await startTestGateway({
        store: storeKind,
        upstreams: { openai: `${sim.url}/v1`, anthropic: `http://127.0.0.1:${echo.port}` },
        env: { MULTIGRID_POLL_MS: '20', LOG_LEVEL: 'debug' },
        logLines,
      })
      a = await gw.newAccount('10', { rate_limit_per_minute: 100_000 })
      b = await gw.newAccount('10', { rate_limit_per_minute: 100_000 })
      secrets.push(a.key, b.key)
      // `batches` implies `read`, so the key without `read` has `inference` alone.
      without.batches = (await adminKey(a.accountId, ['read', 'inference'])).key
      without.read = (await adminKey(a.accountId, ['inference'])).key
      without.inference = (await adminKey(a.accountId, ['batches', 'read'])).key
      const doomed = await adminKey(a.accountId)
      revoked = doomed.key
      expect((await gw.admin(`/keys/${doomed.id}`, { method: 'DELETE' })).status).toBe(200)

      // Account A's data: a finished native batch (one line refused upstream by the echo server),
      // an uploaded file, and a facade batch made from it.
      const auth = { authorization: `Bearer ${a.key}` }
      const lines = [
        chatLine('a-1', PROMPT),
        chatLine('a-2', `${PROMPT} again`),
        chatLine('a-3', PROMPT, {}, 'sim/claude'),
      ]
      const batch = (await (
        await fetch(`${gw.url}/v1/batches`, { method: 'POST', headers: auth, body: jsonl(lines) })
      ).json()) as { id: string }
      const file = (await (
        await fetch(`${gw.url}/openai/v1/files`, { method: 'POST', headers: auth, body: upload() })
      ).json()) as { id: string }
      const created = await fetch(`${gw.url}/openai/v1/batches`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({
          input_file_id: file.id,
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
        }),
      })
      const fbatch = (await created.json()) as { id: string }
      for (const id of [batch.id, fbatch.id]) {
        await waitFor(`batch ${id}`, async () => {
          const view = (await (
            await fetch(`${gw.url}/v1/batches/${id}`, { headers: auth })
          ).json()) as { status: string }
          return FINAL_BATCH.includes(view.status)
        })
      }
      const view = (await (
        await fetch(`${gw.url}/openai/v1/batches/${fbatch.id}`, { headers: auth })
      ).json()) as { output_file_id: string }
      const webhook = (await (
        await fetch(`${gw.url}/v1/webhooks`, {
          method: 'POST',
          headers: { ...auth, 'content-type': 'application/json' },
          body: JSON.stringify({ url: WEBHOOK_URL, events: WEBHOOK_EVENTS }),
        })
      ).json()) as { id: string; secret: string }
      secrets.push(webhook.secret)
      ids = {
        batch: batch.id,
        file: file.id,
        fbatch: fbatch.id,
        output: view.output_file_id,
        webhook: webhook.id,
      }
      expect(ids.output).toMatch(/^file-/)
    })

    afterAll(async () => {
      await gw.stop()
      await sim.stop()
      echo.stop(true)
    })

    test('no key, a malformed Authorization header, an unknown or a revoked key: 401 invalid_api_key everywhere', async () => {
      const headers = [
        null,
        '',
        'Bearer',
        'Bearer ',
        `Token ${a.key}`,
        `Basic ${btoa(`user:${a.key}`)}`,
        a.key,
        `Bearer ${a.key} extra`,
        `Bearer ${a.key.slice(0, -1)}`,
        'Bearer mg_00000000000000000000000000000000',
        'Bearer sk-not-ours',
        `Bearer ${revoked}`,
      ]
      const failures: string[] = []
      for (const endpoint of ENDPOINTS) {
        for (const authorization of headers) {
          const { status, json } = await call('unauthenticated', endpoint, authorization, false)
          const error = status === 401 ? json().error : null
          if (
            status !== 401 ||
            error?.code !== 'invalid_api_key' ||
            error?.type !== 'authentication_error'
          ) {
            failures.push(
              `${endpoint.name} with ${JSON.stringify(authorization?.slice(0, 12))}…: ${status} ${String(error?.code)}`,
            )
          }
        }
      }
      expect(failures).toEqual([])
      // An API key is no admin token.
      for (const [method, path] of [
        ['POST', '/admin/v1/accounts'],
        ['GET', `/admin/v1/accounts/${a.accountId}`],
      ]) {
        const body = method === 'POST' ? JSON.stringify({ name: 'mine' }) : undefined
        const response = await fetch(`${gw.url}${path}`, {
          method,
          body,
          headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
        })
        expect(response.status).toBe(401)
        answers.push({
          what: `admin with an API key: ${path}`,
          own: false,
          status: 401,
          text: await response.text(),
        })
      }
    })

    test('a key without the scope: 403 insufficient_permissions; any scope may list models', async () => {
      const failures: string[] = []
      for (const endpoint of ENDPOINTS) {
        if (endpoint.scope === 'any') {
          for (const key of Object.values(without)) {
            const { status } = await call('any scope', endpoint, `Bearer ${key}`, true)
            if (status !== 200) failures.push(`${endpoint.name}: ${status}`)
          }
          continue
        }
        const { status, json } = await call(
          'missing scope',
          endpoint,
          `Bearer ${without[endpoint.scope]}`,
          false,
        )
        const error = status === 403 ? json().error : null
        if (
          status !== 403 ||
          error?.code !== 'insufficient_permissions' ||
          error?.type !== 'permission_error'
        ) {
          failures.push(
            `${endpoint.name} without ${endpoint.scope}: ${status} ${String(error?.code)}`,
          )
        }
      }
      expect(failures).toEqual([])
    })

    test("another account's ids: 404, answered exactly as if they did not exist", async () => {
      const nobody = missing(ids)
      const failures: string[] = []
      for (const endpoint of ENDPOINTS.filter((e) => e.path.includes('{') || e.owned)) {
        const theirs = await call('other account', endpoint, `Bearer ${b.key}`, false)
        const none = await call('nobody', endpoint, `Bearer ${b.key}`, false, nobody)
        const normalise = (text: string, use: Ids) =>
          Object.entries(use).reduce((t, [name, id]) => t.split(id).join(`{${name}}`), text)
        if (theirs.status !== 404) failures.push(`${endpoint.name}: ${theirs.status}`)
        if (normalise(theirs.text, ids) !== normalise(none.text, nobody)) {
          failures.push(`${endpoint.name}: ${theirs.text} differs from ${none.text}`)
        }
      }
      expect(failures).toEqual([])

      // Nothing of A's moved: its batches are not cancelled, its file is still there.
      const own = (path: string) =>
        fetch(`${gw.url}${path}`, { headers: { authorization: `Bearer ${a.key}` } })
      expect(
        ((await (await own(`/v1/batches/${ids.batch}`)).json()) as { status: string }).status,
      ).toBe('completed')
      expect(
        ((await (await own(`/openai/v1/batches/${ids.fbatch}`)).json()) as { status: string })
          .status,
      ).toBe('completed')
      expect((await own(`/openai/v1/files/${ids.file}`)).status).toBe(200)
      expect((await own(`/openai/v1/files/${ids.file}/content`)).status).toBe(200)
      expect((await own(`/v1/webhooks/${ids.webhook}/deliveries`)).status).toBe(200)

      // B's lists hold none of A's ids, even paged from one of them.
      for (const path of [
        '/v1/batches',
        `/v1/batches?after=${ids.batch}`,
        '/openai/v1/batches',
        `/openai/v1/batches?after=${ids.fbatch}`,
        '/openai/v1/files',
        `/openai/v1/files?after=${ids.file}`,
        '/v1/webhooks',
      ]) {
        const { status, text } = await call(
          'other account list',
          { name: path, method: 'GET', path, scope: 'batches' },
          `Bearer ${b.key}`,
          false,
        )
        expect(status).toBe(200)
        for (const id of Object.values(ids)) expect(text).not.toContain(id)
      }
    })

    test("an Idempotency-Key or a retried facade create never returns another account's batch", async () => {
      const key = `shared-${storeKind}`
      const first = await fetch(`${gw.url}/v1/batches`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.key}`, 'idempotency-key': key },
        body: jsonl([chatLine('i-1', PROMPT)]),
      })
      expect(first.status).toBe(201)
      const theirs = (await first.json()) as { id: string }
      const mine = await fetch(`${gw.url}/v1/batches`, {
        method: 'POST',
        headers: { authorization: `Bearer ${b.key}`, 'idempotency-key': key },
        body: jsonl([chatLine('i-1', 'my own words')]),
      })
      expect(mine.status).toBe(201)
      expect(((await mine.json()) as { id: string }).id).not.toBe(theirs.id)
      // The SDK's retry of a create repeats the body exactly; A's body names A's file.
      const retried = await fetch(`${gw.url}/openai/v1/batches`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${b.key}`,
          'content-type': 'application/json',
          'x-stainless-retry-count': '1',
        },
        body: JSON.stringify({
          input_file_id: ids.file,
          endpoint: '/v1/chat/completions',
          completion_window: '24h',
        }),
      })
      expect(retried.status).toBe(404)
      answers.push({
        what: 'retried create of another account',
        own: false,
        status: 404,
        text: await retried.text(),
      })
    })

    test('no response and no log line carries a key; no log line and no other reader gets a prompt', async () => {
      // The upstream quoted the gateway's provider key in its refusal: line a-3 must not carry it.
      const results = await fetch(`${gw.url}/v1/batches/${ids.batch}/results`, {
        headers: { authorization: `Bearer ${a.key}` },
      })
      const text = await results.text()
      answers.push({ what: 'own results', own: true, status: results.status, text })
      const refused = text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
        .find((row) => row.custom_id === 'a-3')
      expect(refused.status).toBe('failed')
      expect(refused.error.code).toBe('upstream_error')
      const live = await fetch(`${gw.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${a.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'sim/claude',
          messages: [{ role: 'user', content: PROMPT }],
          max_tokens: 8,
        }),
      })
      expect(live.status).toBeGreaterThanOrEqual(500)
      answers.push({
        what: 'live call refused upstream',
        own: true,
        status: live.status,
        text: await live.text(),
      })

      expect(answers.length).toBeGreaterThan(300)
      expect(logLines.length).toBeGreaterThan(100)
      expect(logLines.some((line) => line.includes('"level":"debug"'))).toBe(true)
      const leaks: string[] = []
      for (const answer of answers) {
        // A key, or all of it but its last character (as sent in one malformed header).
        for (const secret of secrets) {
          if (answer.text.includes(secret.slice(0, -1)))
            leaks.push(`${answer.what} (${answer.status}) carries a key`)
        }
        if (answer.text.includes('PROMPT-MARKER') && (!answer.own || answer.status >= 400)) {
          leaks.push(`${answer.what} (${answer.status}) carries the prompt`)
        }
      }
      for (const line of logLines) {
        for (const secret of secrets)
          if (line.includes(secret)) leaks.push(`log line carries a key: ${line.slice(0, 200)}`)
        if (line.includes('PROMPT-MARKER'))
          leaks.push(`log line carries the prompt: ${line.slice(0, 200)}`)
      }
      expect(leaks).toEqual([])
      console.log(
        `isolation (${storeKind}): ${answers.length} answers and ${logLines.length} log lines ` +
          `scanned for ${secrets.length} secrets and the prompt`,
      )
    })
  })
}
