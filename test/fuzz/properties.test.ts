/**
 * Property-based fuzzing (fast-check) of the validator, called directly, and of the endpoints that
 * take user bodies: the native submit, the OpenAI facade's create, the live chat endpoint and the
 * admin API. Every answer is a 2xx or a 4xx that says what is wrong; never a 5xx, never a throw.
 * Each property is bounded in runs and in time.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { createCatalog, type Catalog } from '../../src/catalog/catalog.ts'
import { loadConfig } from '../../src/config.ts'
import { MAX_ISSUES } from '../../src/ingest/issues.ts'
import { validateBatchFile } from '../../src/ingest/validate-batch-file.ts'
import { compileSchema } from '../../src/schemas/compile.ts'
import { chatBodySchema, embeddingsBodySchema } from '../../src/schemas/requests.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import {
  chatLine,
  embedLine,
  jsonl,
  startTestGateway,
  STORES,
  type TestGateway,
} from '../helpers/gateway.ts'
import { refusalProblems } from './refusal.ts'

const LIMITS = { maxLines: 50, maxCustomIdLength: 128 }
/** Each property stops after this long even if its runs are not done (bounded suite). */
const TIME_LIMIT_MS = 8_000

function catalogForTests(): Catalog {
  const config = loadConfig({
    MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
    MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
  })
  return createCatalog(config.catalog, config.providerKeys)
}

// Values that break naive code: odd numbers, odd strings, odd containers.
const nasty = fc.oneof(
  fc.constantFrom(0, -1, 1.5, 1e308, -1e-308, Number.MAX_SAFE_INTEGER + 2, 9, 4097, 128001),
  fc.constantFrom(
    '',
    ' ',
    '\u0000',
    '\uD800',
    '\uFEFF',
    'é'.repeat(200),
    'POST',
    'user',
    'sim/chat',
  ),
  fc.constantFrom(null, true, false, [], {}, [null], [{}], { role: 'user' }, [1]),
  // Near-valid shapes of the known OpenAI parameters, so both sides of their unions are reached.
  fc.constantFrom<unknown>(
    'auto',
    'none',
    { type: 'function', function: { name: 'f' } },
    { type: 'function', function: { name: 7 } },
    [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
    [{ type: 'custom', custom: { name: 'c' } }],
    { type: 'allowed_tools', allowed_tools: { mode: 'auto', tools: [{}] } },
    { '50256': -100 },
    { '1': 101 },
    { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'object' } } },
    { type: 'json_schema', json_schema: { name: 'a b', schema: {} } },
    { name: 'a', schema: {} },
  ),
  fc.jsonValue({ maxDepth: 3 }),
  fc.string({ unit: 'binary', maxLength: 40 }),
)

const PATHS = [
  ['custom_id'],
  ['method'],
  ['url'],
  ['body'],
  ['body', 'model'],
  ['body', 'messages'],
  ['body', 'messages', 0],
  ['body', 'messages', 0, 'role'],
  ['body', 'messages', 0, 'content'],
  ['body', 'messages', 1],
  ['body', 'max_tokens'],
  ['body', 'max_completion_tokens'],
  ['body', 'n'],
  ['body', 'temperature'],
  ['body', 'stream'],
  ['body', 'provider'],
  ['body', 'provider', 'order'],
  ['body', 'stop'],
  ['body', 'tools'],
  ['body', 'tools', 0],
  ['body', 'tools', 0, 'function'],
  ['body', 'tool_choice'],
  ['body', 'tool_choice', 'function'],
  ['body', 'logit_bias'],
  ['body', 'logit_bias', '50256'],
  ['body', 'response_format'],
  ['body', 'response_format', 'json_schema'],
  ['body', 'response_format', 'json_schema', 'schema'],
  ['body', 'seed'],
  ['extra'],
  ['body', 'input'],
  ['body', 'dimensions'],
] as const

/** A valid line of `base` with, half the time, one field replaced by a nasty value or deleted. */
const mutatedLineOf = (base: 'chat' | 'embed') =>
  fc
    .record({
      id: fc.string({ minLength: 1, maxLength: 12 }),
      path: fc.constantFrom(...PATHS),
      value: fc.option(nasty, { nil: undefined, freq: 5 }),
      mutate: fc.boolean(),
    })
    .map(({ id, path, value, mutate }) => {
      const line = structuredClone(base === 'chat' ? chatLine(id) : embedLine(id)) as Record<
        string,
        any
      >
      if (!mutate) return line
      let node = line
      for (const key of path.slice(0, -1)) {
        if (typeof node[key] !== 'object' || node[key] === null) node[key] = {}
        node = node[key]
      }
      const last = path[path.length - 1]
      if (value === undefined) delete node[last]
      else node[last] = value
      return line
    })
const mutatedLine = fc.constantFrom('chat' as const, 'embed' as const).chain(mutatedLineOf)

/** Text-level damage to a line, now and then: cut it, splice bytes into it, or repeat it. */
const damagedTextOf = (base: 'chat' | 'embed') =>
  fc
    .record({
      line: mutatedLineOf(base),
      how: fc.constantFrom('none', 'none', 'none', 'none', 'none', 'cut', 'splice', 'double'),
      at: fc.nat(),
      junk: fc.string({ unit: 'binary', maxLength: 6 }),
    })
    .map(({ line, how, at, junk }) => {
      const text = JSON.stringify(line)
      const position = at % (text.length + 1)
      if (how === 'cut') return text.slice(0, position)
      if (how === 'splice') return text.slice(0, position) + junk + text.slice(position)
      if (how === 'double') return text + '\n' + text
      return text
    })

/** A file of one endpoint: mostly lines, some blank, now and then a random string. */
const fileText = fc
  .constantFrom('chat' as const, 'embed' as const)
  .chain((base) =>
    fc
      .array(
        fc.oneof(
          { weight: 8, arbitrary: damagedTextOf(base) },
          { weight: 1, arbitrary: fc.constantFrom('', ' ', '\r') },
          { weight: 1, arbitrary: fc.string({ maxLength: 20 }) },
        ),
        { minLength: 0, maxLength: 5 },
      )
      .map((lines) => lines.join('\n')),
  )

/** `base` with up to two of its fields (or new ones) set to generated values or deleted. */
function mutatedObject(
  base: Record<string, unknown>,
  fields: Record<string, fc.Arbitrary<unknown>>,
) {
  const change = fc.oneof(
    ...Object.entries(fields).map(([name, value]) =>
      fc.tuple(fc.constant(name), fc.option(value, { nil: undefined })),
    ),
  )
  return fc.array(change, { maxLength: 2 }).map((changes) => {
    const result: Record<string, unknown> = { ...base }
    for (const [name, value] of changes) {
      if (value === undefined) delete result[name]
      else result[name] = value
    }
    return result
  })
}

/** Invariants of a verdict on `bytes`, as a list of broken ones. */
function verdictProblems(bytes: Uint8Array, catalog: Catalog) {
  const verdict = validateBatchFile(bytes, catalog, LIMITS)
  const problems: string[] = []
  const lineCount = Buffer.from(bytes).toString('latin1').split('\n').length
  if (verdict.ok) {
    if (verdict.lines.length === 0) problems.push('accepted with no lines')
    for (const line of verdict.lines) {
      if (line.lineNo < 1 || line.lineNo > lineCount)
        problems.push(`accepted line ${line.lineNo} of ${lineCount}`)
      JSON.parse(line.input)
    }
    if (!verdict.ceiling.isFinite() || verdict.ceiling.isNegative())
      problems.push(`ceiling ${verdict.ceiling}`)
    return problems
  }
  if (verdict.issues.length === 0 || verdict.issues.length > MAX_ISSUES)
    problems.push(`${verdict.issues.length} issues`)
  if (verdict.omitted < 0) problems.push('negative omitted')
  let previous = 0
  for (const issue of verdict.issues) {
    if (!Number.isInteger(issue.line) || issue.line < 1 || issue.line > Math.max(1, lineCount)) {
      problems.push(`issue on line ${issue.line} of ${lineCount}`)
    }
    if (issue.line < previous) problems.push('issues out of line order')
    previous = issue.line
    if (!issue.message || !issue.fix)
      problems.push(`issue without message or fix: ${JSON.stringify(issue)}`)
  }
  return problems
}

describe('the validator, called directly', () => {
  const catalog = catalogForTests()

  test('the compiled fast check agrees with zod on every body', () => {
    const chat = compileSchema(chatBodySchema)
    const embeddings = compileSchema(embeddingsBodySchema)
    fc.assert(
      fc.property(mutatedLine, (line) => {
        const body = (line as { body?: unknown }).body
        expect(chat.check(body).success).toBe(chatBodySchema.safeParse(body).success)
        expect(embeddings.check(body).success).toBe(embeddingsBodySchema.safeParse(body).success)
      }),
      { numRuns: 3000, interruptAfterTimeLimit: TIME_LIMIT_MS },
    )
  })

  test('arbitrary bytes: never throws; issues are line-numbered, in order, with a fix', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 400 }), (bytes) => {
        expect(verdictProblems(bytes, catalog)).toEqual([])
      }),
      { numRuns: 1500, interruptAfterTimeLimit: TIME_LIMIT_MS },
    )
  })

  test('damaged and mutated lines: never throws; a verdict obeys its invariants', () => {
    fc.assert(
      fc.property(fileText, (text) => {
        expect(verdictProblems(new TextEncoder().encode(text), catalog)).toEqual([])
      }),
      { numRuns: 2000, interruptAfterTimeLimit: TIME_LIMIT_MS },
    )
  })

  test('one bad line among good ones is named by its line number', () => {
    const bad = mutatedLine.filter(
      (line) => !validateBatchFile(new TextEncoder().encode(jsonl([line])), catalog, LIMITS).ok,
    )
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 8 }), bad, (before, line) => {
        const good = Array.from({ length: before }, (_, i) => chatLine(`good-${i}`))
        const text = jsonl([...good, line])
        const verdict = validateBatchFile(new TextEncoder().encode(text), catalog, LIMITS)
        expect(verdict.ok).toBe(false)
        if (!verdict.ok) expect(verdict.issues.map((i) => i.line)).toContain(before + 1)
      }),
      { numRuns: 500, interruptAfterTimeLimit: TIME_LIMIT_MS },
    )
  })
})

for (const storeKind of STORES)
  describe(`the HTTP endpoints under fuzzing (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    let key: string
    let fileId: string
    const logLines: string[] = []

    beforeAll(async () => {
      sim = await startSimulator()
      gw = await startTestGateway({
        store: storeKind,
        upstreams: { openai: `${sim.url}/v1` },
        env: { MULTIGRID_DISPATCH: '0', MULTIGRID_MAX_LINES: String(LIMITS.maxLines) },
        logLines,
      })
      ;({ key } = await gw.newAccount(
        '1000',
        { rate_limit_per_minute: 1_000_000 },
        { max_open_batches: 100_000 },
      ))
      const form = new FormData()
      form.set('purpose', 'batch')
      form.set('file', new Blob([jsonl([chatLine('f-1'), chatLine('f-2')])]), 'requests.jsonl')
      fileId = (
        (await (
          await gw.request('/openai/v1/files', key, { method: 'POST', body: form })
        ).json()) as { id: string }
      ).id
    })
    afterAll(async () => {
      await gw.stop()
      await sim.stop()
      for (const [what, tally] of statuses)
        console.log(`fuzzed ${what} (${storeKind}): statuses ${JSON.stringify(tally)}`)
      expect(logLines.filter((line) => line.includes('http.unhandled'))).toEqual([])
    })

    /** Statuses seen per property, printed once for docs/RELIABILITY.md. */
    const statuses = new Map<string, Record<number, number>>()

    /** A 2xx, or a 4xx that says what is wrong. */
    async function answered(response: Response, what: string) {
      const tally = statuses.get(what) ?? {}
      tally[response.status] = (tally[response.status] ?? 0) + 1
      statuses.set(what, tally)
      const text = await response.text()
      if (response.status >= 200 && response.status < 300) {
        // Whatever the fuzzer sent, an account never starts below zero.
        if (
          what === 'admin' &&
          response.status === 201 &&
          JSON.parse(text).balance_usd?.startsWith('-')
        ) {
          return [`account created with a negative balance: ${text}`]
        }
        return []
      }
      return refusalProblems(response.status, text)
    }

    test('POST /v1/batches: every fuzzed file gets a 2xx or a 4xx with a message', async () => {
      const submission = fc.record({
        text: fileText,
        type: fc.constantFrom(
          'application/jsonl',
          'application/x-ndjson',
          'text/plain',
          'application/json',
          'application/octet-stream',
          'text/csv',
          '',
        ),
        query: fc.constantFrom(
          '',
          '?dry_run=true',
          '?dry_run=1&name=x',
          '?completion_window_hours=0',
          '?completion_window_hours=168',
          '?name=%00',
          '?completion_window_hours=1e2',
        ),
      })
      await fc.assert(
        fc.asyncProperty(submission, async ({ text, type, query }) => {
          const response = await gw.request(`/v1/batches${query}`, key, {
            method: 'POST',
            body: text,
            headers: { 'content-type': type },
          })
          expect(await answered(response, 'POST /v1/batches')).toEqual([])
        }),
        { numRuns: 250, interruptAfterTimeLimit: TIME_LIMIT_MS },
      )
      expect((await fetch(`${gw.url}/healthz`)).status).toBe(200)
      expect(
        (
          await gw.request('/v1/batches', key, {
            method: 'POST',
            body: jsonl([chatLine('still-ok')]),
          })
        ).status,
      ).toBe(201)
    })

    test('POST /openai/v1/batches: fuzzed create bodies get a 2xx or a 4xx', async () => {
      const create = mutatedObject(
        { input_file_id: '@file', endpoint: '/v1/chat/completions', completion_window: '24h' },
        {
          input_file_id: nasty,
          endpoint: fc.oneof(fc.constantFrom('/v1/embeddings', '/v1/responses'), nasty),
          completion_window: fc.oneof(
            fc.constantFrom('1h', '168h', '169h', '0h', '24', '1d', '024h'),
            nasty,
          ),
          metadata: fc.oneof(
            nasty,
            fc.dictionary(fc.string({ maxLength: 70 }), nasty, { maxKeys: 20 }),
          ),
          extra_body: fc.oneof(
            nasty,
            fc.record({ completion_window: nasty }, { requiredKeys: [] }),
          ),
        },
      ).map((body) => (body.input_file_id === '@file' ? { ...body, input_file_id: fileId } : body))
      await fc.assert(
        fc.asyncProperty(create, fc.boolean(), async (body, retried) => {
          const response = await gw.request('/openai/v1/batches', key, {
            method: 'POST',
            body: JSON.stringify(body),
            headers: {
              'content-type': 'application/json',
              ...(retried ? { 'x-stainless-retry-count': '1' } : {}),
            },
          })
          expect(await answered(response, 'POST /openai/v1/batches')).toEqual([])
        }),
        { numRuns: 150, interruptAfterTimeLimit: TIME_LIMIT_MS },
      )
    })

    test('POST /v1/chat/completions: fuzzed live bodies get a 2xx or a 4xx', async () => {
      await fc.assert(
        fc.asyncProperty(mutatedLine, async (line) => {
          const response = await gw.request('/v1/chat/completions', key, {
            method: 'POST',
            body: JSON.stringify(line.body ?? line),
            headers: { 'content-type': 'application/json' },
          })
          expect(await answered(response, 'POST /v1/chat/completions')).toEqual([])
        }),
        { numRuns: 150, interruptAfterTimeLimit: TIME_LIMIT_MS },
      )
    })

    test('the admin API: fuzzed account, credit and key bodies get a 2xx or a 4xx', async () => {
      const { accountId } = await gw.newAccount('1')
      const decimal = fc.oneof(
        {
          weight: 3,
          arbitrary: fc.constantFrom(
            '100',
            '0',
            '-5',
            '1e3',
            '12.50',
            '0.0000001',
            '9'.repeat(400),
            '-0',
            ' 1',
            '1.',
            '.5',
            '١٠',
          ),
        },
        { weight: 1, arbitrary: nasty },
      )
      const counts = fc.oneof(
        nasty,
        fc.constantFrom(1, 2 ** 31 - 1, 2 ** 31, 2 ** 53, 1e20, -(2 ** 31)),
      )
      const scopes = fc.oneof(
        nasty,
        fc.array(fc.constantFrom('batches', 'read', 'inference', 'admin', '')),
      )
      const credits = `/accounts/${accountId}/credits`
      const keys = `/accounts/${accountId}/keys`
      const request = fc.oneof(
        fc.tuple(
          fc.constant('/accounts'),
          mutatedObject(
            { name: 'acme', credit_usd: '10' },
            {
              name: nasty,
              credit_usd: decimal,
              max_open_batches: counts,
              rate_limit_per_minute: counts,
              other: nasty,
            },
          ),
        ),
        fc.tuple(
          fc.constant(credits),
          mutatedObject({ amount_usd: '5' }, { amount_usd: decimal, other: nasty }),
        ),
        fc.tuple(
          fc.constant(keys),
          mutatedObject(
            { name: 'ci' },
            { name: nasty, scopes, rate_limit_per_minute: counts, other: nasty },
          ),
        ),
        fc.tuple(fc.constantFrom('/accounts', credits, keys), nasty),
      )
      await fc.assert(
        fc.asyncProperty(request, fc.nat(9), async ([where, value], cut) => {
          const response = await fetch(`${gw.url}/admin/v1${where}`, {
            method: 'POST',
            headers: {
              authorization: 'Bearer test-admin-token-0123456789',
              'content-type': 'application/json',
            },
            // One in ten bodies is cut short: no longer JSON.
            body: cut === 0 ? JSON.stringify(value).slice(0, -1) : JSON.stringify(value),
          })
          expect(await answered(response, 'admin')).toEqual([])
        }),
        { numRuns: 500, interruptAfterTimeLimit: TIME_LIMIT_MS },
      )
      const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
        balance_usd: string
      }
      expect(Number(account.balance_usd)).toBeGreaterThanOrEqual(0)
    })
  })
