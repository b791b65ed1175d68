/**
 * One answer for one refusal (docs/native-api.md, docs/money-and-limits.md, docs/webhooks-and-streams.md): every admission path — the native submit, a
 * submit that may wait for credit, the facade's batches.create, the dashboard's form, a retry and
 * the dashboard's retry — is driven over HTTP to every result kind of SUBMIT_RESULT_KINDS, and
 * each answers a non-empty 2xx/4xx (a 303 to the batch on the dashboard), the refusals with the
 * same code and `error.limit` everywhere. A kind added to the results without a row in
 * `EXPECTED` fails the type check and this test. A retry over the daily limit once answered an
 * empty 200.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { answerOf, SUBMIT_RESULT_KINDS } from '../../src/admission/admission-answer.ts'
import type { SubmitResult } from '../../src/admission/submit-batch.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'

type Kind = (typeof SUBMIT_RESULT_KINDS)[number]
const PATHS = [
  'native',
  'wait_for_credit',
  'facade',
  'dashboard',
  'retry',
  'dashboard_retry',
] as const
type Path = (typeof PATHS)[number]

/**
 * What each path answers for each kind: the facade fails a file it cannot take as OpenAI does
 * (200, a failed batch) but refuses credit and limits as the others do (SPEC §19), a submit that may wait for credit waits (201, docs/open-models.md), the dashboard's
 * successes are a 303 to the batch's page.
 */
const EXPECTED: Record<Kind, Record<Path, number>> = {
  created: {
    native: 201,
    wait_for_credit: 201,
    facade: 200,
    dashboard: 303,
    retry: 201,
    dashboard_retry: 303,
  },
  duplicate: {
    native: 200,
    wait_for_credit: 200,
    facade: 200,
    dashboard: 303,
    retry: 200,
    dashboard_retry: 303,
  },
  invalid: {
    native: 400,
    wait_for_credit: 400,
    facade: 200,
    dashboard: 400,
    retry: 400,
    dashboard_retry: 400,
  },
  insufficient_quota: {
    native: 402,
    wait_for_credit: 201,
    facade: 402,
    dashboard: 402,
    retry: 402,
    dashboard_retry: 402,
  },
  limit_exceeded: {
    native: 429,
    wait_for_credit: 429,
    facade: 429,
    dashboard: 429,
    retry: 429,
    dashboard_retry: 429,
  },
  daily_limit_exceeded: {
    native: 429,
    wait_for_credit: 429,
    facade: 429,
    dashboard: 429,
    retry: 429,
    dashboard_retry: 429,
  },
}

/** One of each kind, as values: the table answers every one. */
const SAMPLES: Record<Kind, SubmitResult> = {
  created: { kind: 'created', batch: { id: 'batch_1' } as never },
  duplicate: { kind: 'duplicate', batch: { id: 'batch_1' } as never },
  invalid: { kind: 'invalid', issues: [], omitted: 0, lineCount: 1 },
  insufficient_quota: { kind: 'insufficient_quota', costCeilingUsd: '1.00', availableUsd: '0.50' },
  limit_exceeded: { kind: 'limit_exceeded', limit: 10, inUse: 10 },
  daily_limit_exceeded: { kind: 'daily_limit_exceeded', limitUsd: '100', usedUsd: '97.5' },
}

const CATALOG = testCatalog({ openai: 'http://127.0.0.1:9/v1' })
/** A line whose model the second gateway's catalog no longer has: its retry is invalid. */
const LEAVING = chatLine('leaving', 'hi', {}, 'sim/strict')

interface Armed {
  key: string
  accountId: string
  parentId: string
  cookie: string
}

test('the table answers every result kind, and every kind has a row for every path', () => {
  expect(Object.keys(EXPECTED).sort()).toEqual([...SUBMIT_RESULT_KINDS].sort())
  expect(Object.keys(SAMPLES).sort()).toEqual([...SUBMIT_RESULT_KINDS].sort())
  for (const kind of SUBMIT_RESULT_KINDS) {
    const answer = answerOf(SAMPLES[kind])
    if (answer.kind === 'refused') {
      expect(answer.error.status).toBeGreaterThanOrEqual(400)
      expect(answer.error.status).toBeLessThan(500)
      expect(answer.error.message.length).toBeGreaterThan(20)
    }
    expect(answer.kind).toBe(
      kind === 'created' || kind === 'duplicate'
        ? 'batch'
        : kind === 'invalid'
          ? 'invalid'
          : 'refused',
    )
  }
})

describe('every admission path answers every result kind (sqlite)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mg-answers-'))
  const env = { MULTIGRID_DISPATCH: '0', MULTIGRID_DATA_DIR: dataDir }
  let gw: TestGateway
  /** The retry-invalid cases' accounts, whose retries run once the catalog has changed. */
  const later: { path: Path; armed: Armed }[] = []
  const bodies: Record<string, { code: string; limit?: unknown }[]> = {}

  beforeAll(async () => {
    gw = await startTestGateway({ catalog: CATALOG, env })
  })
  afterAll(() => gw.stop())

  async function signIn(key: string) {
    const response = await fetch(`${gw.url}/dashboard/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ key }),
      redirect: 'manual',
    })
    expect(response.status).toBe(303)
    return response.headers.get('set-cookie')!.split(';')[0]!
  }

  /** An account with an ended parent batch (cancelled lines to retry), set up to meet `kind`. */
  async function arm(kind: Kind): Promise<Armed> {
    const credit = kind === 'insufficient_quota' ? '0.000001' : '100'
    const limits = kind === 'limit_exceeded' ? { max_open_batches: 1 } : {}
    const { key, accountId } = await gw.newAccount(
      credit,
      { rate_limit_per_minute: 10_000 },
      limits,
    )
    // Capped at what the smallest credit covers, so the parent is admitted whatever comes next.
    const parent = await gw.request('/v1/batches?max_cost_usd=0.000001', key, {
      method: 'POST',
      body: jsonl([chatLine('a'), LEAVING]),
    })
    expect(parent.status).toBe(201)
    const parentId = ((await parent.json()) as { id: string }).id
    expect((await gw.request(`/v1/batches/${parentId}`, key, { method: 'DELETE' })).status).toBe(
      200,
    )
    if (kind === 'limit_exceeded') {
      const blocker = await gw.request('/v1/batches?max_cost_usd=0.000001', key, {
        method: 'POST',
        body: jsonl([chatLine('b')]),
      })
      expect(blocker.status).toBe(201)
    }
    if (kind === 'daily_limit_exceeded') {
      const patched = await gw.admin(`/accounts/${accountId}`, {
        method: 'PATCH',
        body: { daily_spend_limit_usd: '0' },
      })
      expect(patched.status).toBe(200)
    }
    return { key, accountId, parentId, cookie: await signIn(key) }
  }

  const fileFor = (kind: Kind) =>
    jsonl([kind === 'invalid' ? chatLine('a', 'hi', {}, 'nope/none') : chatLine('a')])

  /** One request down `path`; the idempotency key repeats it for `duplicate`. */
  function send(path: Path, kind: Kind, armed: Armed, server: TestGateway): Promise<Response> {
    const idem = kind === 'duplicate' ? 'abcdef0123456789' : null
    const headers: Record<string, string> = idem ? { 'idempotency-key': idem } : {}
    switch (path) {
      case 'native':
      case 'wait_for_credit':
        return server.request(
          path === 'native' ? '/v1/batches' : '/v1/batches?wait_for_credit=true',
          armed.key,
          { method: 'POST', body: fileFor(kind), headers },
        )
      case 'facade':
        return facadeCreate(server, armed.key, fileFor(kind), headers)
      case 'dashboard': {
        const form = new FormData()
        form.set('file', new Blob([fileFor(kind)]), 'a.jsonl')
        if (idem) form.set('idempotency_key', idem)
        return fetch(`${server.url}/dashboard/batches`, {
          method: 'POST',
          headers: { cookie: armed.cookie },
          body: form,
          redirect: 'manual',
        })
      }
      case 'retry':
        return server.request(`/v1/batches/${armed.parentId}/retry`, armed.key, {
          method: 'POST',
          headers,
        })
      case 'dashboard_retry':
        return fetch(`${server.url}/dashboard/batches/${armed.parentId}/retry`, {
          method: 'POST',
          headers: { cookie: armed.cookie, 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams(idem ? { idempotency_key: idem } : {}),
          redirect: 'manual',
        })
    }
  }

  async function check(path: Path, kind: Kind, response: Response) {
    const text = await response.text()
    expect([path, kind, response.status]).toEqual([path, kind, EXPECTED[kind][path]])
    if (response.status === 303) {
      expect(response.headers.get('location')).toMatch(/^\/dashboard\/batches\/batch_/)
      return
    }
    expect([path, kind, text.length > 0]).toEqual([path, kind, true])
    if (path.startsWith('dashboard')) {
      expect(response.headers.get('content-type')).toContain('text/html')
      return
    }
    const body = JSON.parse(text)
    if (response.status >= 400) {
      expect(body.error.message.length).toBeGreaterThan(20)
      ;(bodies[kind] ??= []).push({ code: body.error.code, limit: body.error.limit })
    } else if (path === 'facade' && kind !== 'created' && kind !== 'duplicate') {
      expect(body.status).toBe('failed')
      expect(body.errors.data[0].code).toEqual(kind === 'invalid' ? expect.any(String) : kind)
    } else {
      expect(body.id).toMatch(/^batch_/)
    }
  }

  test('each path, each kind: the answer of the table', async () => {
    for (const kind of SUBMIT_RESULT_KINDS) {
      for (const path of PATHS) {
        const armed = await arm(kind)
        if (kind === 'invalid' && path.includes('retry')) {
          later.push({ path, armed })
          continue
        }
        if (kind === 'duplicate') {
          const first = await send(path, kind, armed, gw)
          expect(first.status).toBe(EXPECTED.created[path])
        }
        await check(path, kind, await send(path, kind, armed, gw))
      }
    }
    // One refusal, one answer: the same code and limit on every JSON path.
    expect(bodies.limit_exceeded!.length).toBe(4)
    for (const body of bodies.limit_exceeded!)
      expect(body).toEqual({ code: 'limit_exceeded', limit: { open_batches: 1, in_use: 1 } })
    expect(bodies.daily_limit_exceeded!.length).toBe(4)
    for (const body of bodies.daily_limit_exceeded!)
      expect(body).toMatchObject({
        code: 'limit_exceeded',
        limit: { daily_spend_usd: '0', used_usd: expect.any(String) },
      })
    expect(bodies.insufficient_quota!.length).toBe(3)
    for (const body of bodies.insufficient_quota!) expect(body.code).toBe('insufficient_quota')
  })

  test('a retry whose lines the catalog no longer takes: 400 with the issues, on both retry paths', async () => {
    expect(later.map((entry) => entry.path)).toEqual(['retry', 'dashboard_retry'])
    await gw.stop()
    const today = {
      ...CATALOG,
      models: CATALOG.models.filter((model) => model.id !== 'sim/strict'),
    }
    gw = await startTestGateway({ catalog: today, env })
    for (const { path, armed } of later) {
      // Sessions live in the store, so the cookie still signs in.
      await check(path, 'invalid', await send(path, 'invalid', armed, gw))
    }
  })
})

/** Each account's upload of a file, made once: a repeated create names the same file, as an SDK's retry does. */
const uploads = new Map<string, string>()

async function facadeCreate(
  gw: TestGateway,
  key: string,
  file: string,
  headers: Record<string, string>,
): Promise<Response> {
  let id = uploads.get(`${key}\n${file}`)
  if (id === undefined) {
    const form = new FormData()
    form.set('purpose', 'batch')
    form.set('file', new Blob([file]), 'a.jsonl')
    const uploaded = await gw.request('/openai/v1/files', key, { method: 'POST', body: form })
    expect(uploaded.status).toBe(200)
    id = ((await uploaded.json()) as { id: string }).id
    uploads.set(`${key}\n${file}`, id)
  }
  return gw.request('/openai/v1/batches', key, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({
      input_file_id: id,
      endpoint: '/v1/chat/completions',
      completion_window: '24h',
    }),
  })
}
