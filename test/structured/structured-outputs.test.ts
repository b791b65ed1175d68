/**
 * Structured outputs (docs/open-models.md) over real HTTP, the simulator as upstream (OpenAI- and
 * Anthropic-shaped), steered per line by its `[sim:…]` markers: the validation rules, the dry
 * run's recursion warning, answers checked at result time (not billed when wrong, billed when cut
 * at max_tokens), the facade's error file through the official `openai` package, and live calls.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import OpenAI, { toFile } from 'openai'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { contractProblems } from '../helpers/openai-contract.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

const SCHEMA = {
  type: 'object',
  properties: {
    label: { type: 'string', enum: ['bug', 'question'] },
    priority: { type: 'integer', minimum: 1, maximum: 5 },
  },
  required: ['label', 'priority'],
  additionalProperties: false,
}
const schemaFormat = (schema: unknown = SCHEMA) => ({
  type: 'json_schema',
  json_schema: { name: 'triage', schema, strict: true },
})
const LINKED_LIST = {
  type: 'object',
  properties: { value: { type: 'string' }, next: { $ref: '#' } },
  required: ['value'],
}

/** A structured chat line; `content` may carry a `[sim:…]` marker. */
const structuredLine = (
  id: string,
  content: string,
  extra: Record<string, unknown> = {},
  model = 'sim/chat',
) => chatLine(id, content, { response_format: schemaFormat(), max_tokens: 64, ...extra }, model)

interface ResultLine {
  custom_id: string
  status: string
  response: { status_code: number; body: { choices: { message: { content: string } }[] } } | null
  error: { code: string; message: string; upstream?: unknown } | null
  cost_usd: string
}

for (const storeKind of STORES) {
  describe(`structured outputs (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway

    beforeAll(async () => {
      sim = await startSimulator({ keepBodies: 200 })
      gw = await startTestGateway({
        store: storeKind,
        upstreams: { openai: `${sim.url}/v1`, anthropic: sim.url },
        env: { MULTIGRID_POLL_MS: '50' },
      })
    })
    afterAll(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    const submit = (key: string, lines: unknown[], query = '') =>
      gw.request(`/v1/batches${query}`, key, {
        method: 'POST',
        headers: { 'content-type': 'application/jsonl' },
        body: jsonl(lines),
      })
    const account = async (id: string) =>
      (await (await gw.admin(`/accounts/${id}`)).json()) as {
        balance_usd: string
        held_usd: string
      }
    async function run(key: string, lines: unknown[]) {
      const created = await submit(key, lines)
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: string }
      const batch = await waitFor(`batch ${id}`, async () => {
        const body = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
          status: string
          cost_usd: string
          request_counts: Record<string, number>
        }
        return FINAL_BATCH.includes(body.status) ? body : null
      })
      const text = await (await gw.request(`/v1/batches/${id}/results`, key)).text()
      const results = text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as ResultLine)
      return { id, batch, results: new Map(results.map((r) => [r.custom_id, r])) }
    }

    test('a schema that does not compile, a structured line without max_tokens and every guided_* parameter are line-numbered issues with their fix', async () => {
      const { key } = await gw.newAccount('10')
      const noLimit = chatLine('no-limit', 'hi', { response_format: schemaFormat() })
      delete (noLimit.body as Record<string, unknown>).max_tokens
      const noLimitObject = chatLine('no-limit-object', 'hi', {
        response_format: { type: 'json_object' },
      })
      delete (noLimitObject.body as Record<string, unknown>).max_tokens
      const response = await submit(key, [
        structuredLine('ok', 'fine'),
        structuredLine('misspelt', 'hi', { response_format: schemaFormat({ type: 'strng' }) }),
        structuredLine('dangling', 'hi', {
          response_format: schemaFormat({ $ref: '#/$defs/missing' }),
        }),
        noLimit,
        noLimitObject,
        chatLine('g-json', 'hi', { guided_json: SCHEMA }),
        chatLine('g-regex', 'hi', { guided_regex: '[a-z]+' }),
        chatLine('g-choice', 'hi', { guided_choice: ['a', 'b'] }),
        chatLine('g-grammar', 'hi', { guided_grammar: 'root ::= "a"' }),
      ])
      expect(response.status).toBe(400)
      const body = (await response.json()) as {
        error: { code: string }
        issues: { line: number; custom_id: string; path: string; message: string; fix: string }[]
      }
      expect(body.error.code).toBe('invalid_batch_file')
      const at = (line: number) => body.issues.filter((i) => i.line === line)
      expect(at(1)).toEqual([])
      expect(at(2)).toEqual([
        expect.objectContaining({ custom_id: 'misspelt', path: 'body.response_format' }),
      ])
      expect(at(2)[0].message).toContain('does not compile')
      expect(at(2)[0].fix).toContain('JSON Schema')
      expect(at(3)).toEqual([expect.objectContaining({ path: 'body.response_format' })])
      expect(at(3)[0].message).toContain('#/$defs/missing')
      for (const line of [4, 5]) {
        expect(at(line)).toEqual([expect.objectContaining({ path: 'body.max_tokens' })])
        expect(at(line)[0].fix).toStartWith('set max_tokens')
      }
      const guided = ['guided_json', 'guided_regex', 'guided_choice', 'guided_grammar']
      guided.forEach((param, i) => {
        expect(at(6 + i)).toEqual([expect.objectContaining({ path: `body.${param}` })])
        expect(at(6 + i)[0].fix).toContain('use response_format')
      })
      expect(body.issues).toHaveLength(8)
    })

    test('json_object is refused on a line an Anthropic offering may serve, accepted elsewhere', async () => {
      const { key } = await gw.newAccount('10')
      const jsonObject = { response_format: { type: 'json_object' } }
      const response = await submit(key, [
        structuredLine('claude', 'hi', jsonObject, 'sim/claude'),
        structuredLine('either', 'hi', jsonObject, 'sim/multi'),
      ])
      expect(response.status).toBe(400)
      const { issues } = (await response.json()) as {
        issues: { line: number; path: string; fix: string }[]
      }
      expect(issues.map((i) => [i.line, i.path])).toEqual([
        [1, 'body.response_format.type'],
        [2, 'body.response_format.type'],
      ])
      expect(issues[0].fix).toContain('json_schema')
      expect(issues[1].fix).toContain('"ignore": ["sim-anthropic"]')
      const dry = await submit(key, [structuredLine('openai', 'hi', jsonObject)], '?dry_run=true')
      expect(dry.status).toBe(200)
    })

    test('the dry run warns about a schema that allows unbounded recursion, naming line and param; the quote keeps its fields and the batch is admitted', async () => {
      const { key } = await gw.newAccount('10')
      const lines = [
        structuredLine('flat', 'hi'),
        structuredLine('list', 'hi', { response_format: schemaFormat(LINKED_LIST) }),
      ]
      const dry = await submit(key, lines, '?dry_run=true')
      expect(dry.status).toBe(200)
      const quote = (await dry.json()) as Record<string, unknown>
      expect(quote).toMatchObject({
        object: 'batch.quote',
        dry_run: true,
        line_count: 2,
        credit_sufficient: true,
        warnings_omitted: 0,
      })
      expect(typeof quote.cost_ceiling_usd).toBe('string')
      expect(quote.warnings).toEqual([
        {
          line: 2,
          custom_id: 'list',
          param: 'body.response_format.json_schema.schema.properties.next.$ref',
          message: expect.stringContaining('unbounded recursion'),
          fix: expect.stringContaining('max_tokens'),
        },
      ])
      const plain = await submit(key, [lines[0]], '?dry_run=true')
      expect(((await plain.json()) as { warnings: unknown[] }).warnings).toEqual([])
      const admitted = await submit(key, lines)
      expect(admitted.status).toBe(201)
      expect(await admitted.json()).not.toHaveProperty('warnings')
    })

    test("the dashboard's quote shows the recursion warning with its line and field", async () => {
      const { key } = await gw.newAccount('10')
      const signIn = await fetch(`${gw.url}/dashboard/sign-in`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ key }),
        redirect: 'manual',
      })
      const cookie = signIn.headers.get('set-cookie')!.split(';')[0]
      const form = new FormData()
      const lines = [structuredLine('list', 'hi', { response_format: schemaFormat(LINKED_LIST) })]
      form.set('file', new Blob([jsonl(lines)]), 'list.jsonl')
      form.set('dry_run', 'true')
      const page = await fetch(`${gw.url}/dashboard/batches`, {
        method: 'POST',
        headers: { cookie },
        body: form,
      })
      expect(page.status).toBe(200)
      const html = await page.text()
      expect(html).toContain('Nothing was stored. Warnings: Line 1 (')
      expect(html).toContain('body.response_format.json_schema.schema.properties.next.$ref')
      expect(html).toContain('unbounded recursion')
    })

    test('answers that stopped on their own but are not JSON, or not valid for the schema, end structured_output_invalid, unbilled, with the upstream body; the balance is unchanged and the hold released', async () => {
      const { key, accountId } = await gw.newAccount('10')
      const before = await account(accountId)
      const { batch, results } = await run(key, [
        structuredLine('prose', '[sim:not_json] triage this'),
        structuredLine('shape', '[sim:off_schema] triage this'),
        structuredLine('object', '[sim:not_json] any json', {
          response_format: { type: 'json_object' },
        }),
      ])
      // Every line failed, so the batch did too (as any batch whose lines all fail).
      expect(batch).toMatchObject({ status: 'failed', cost_usd: '0.000000' })
      expect(batch.request_counts).toMatchObject({ failed: 3, succeeded: 0 })
      for (const [id, reason] of [
        ['prose', 'is not JSON'],
        ['shape', 'not valid against the schema triage'],
        ['object', 'is not JSON'],
      ]) {
        const line = results.get(id)!
        // docs/open-models.md writes the unbilled line's cost as "0", exactly.
        expect(line).toMatchObject({ status: 'failed', cost_usd: '0', response: null })
        expect(line.error!.code).toBe('structured_output_invalid')
        expect(line.error!.message).toContain(reason)
        const upstream = line.error!.upstream as {
          choices: { message: { content: unknown } }[]
          usage: { completion_tokens: number }
        }
        expect(upstream.usage.completion_tokens).toBeGreaterThan(0)
        expect(typeof upstream.choices[0].message.content).toBe('string')
      }
      const after = await account(accountId)
      expect(after.balance_usd).toBe(before.balance_usd)
      expect(after.held_usd).toBe('0.000000')
    })

    test('a valid answer is billed; one cut at max_tokens is returned as it is and billed; the account pays exactly the billed lines', async () => {
      const { key, accountId } = await gw.newAccount('10')
      const before = await account(accountId)
      const { batch, results } = await run(key, [
        structuredLine('valid', 'triage this'),
        structuredLine('cut', 'triage this', { max_tokens: 2 }),
        structuredLine('invalid', '[sim:not_json] triage this'),
      ])
      expect(batch.request_counts).toMatchObject({ succeeded: 2, failed: 1 })
      const valid = results.get('valid')!
      expect(valid.status).toBe('succeeded')
      expect(JSON.parse(valid.response!.body.choices[0].message.content)).toEqual({
        label: 'bug',
        priority: 1,
      })
      const cut = results.get('cut')!
      expect(cut.status).toBe('succeeded')
      const choice = cut.response!.body.choices[0] as {
        finish_reason?: string
        message: { content: string }
      }
      expect(choice.finish_reason).toBe('length')
      expect(() => JSON.parse(choice.message.content)).toThrow()
      expect(new Decimal(valid.cost_usd).gt(0)).toBe(true)
      expect(new Decimal(cut.cost_usd).gt(0)).toBe(true)
      expect(results.get('invalid')!.cost_usd).toBe('0')
      const billed = new Decimal(valid.cost_usd).plus(cut.cost_usd)
      expect(new Decimal(batch.cost_usd).eq(billed)).toBe(true)
      const after = await account(accountId)
      expect(new Decimal(before.balance_usd).minus(after.balance_usd).eq(billed)).toBe(true)
      expect(after.held_usd).toBe('0.000000')
    })

    test('an Anthropic-kind provider gets the schema as output_config.format and its answers are checked the same way', async () => {
      const { key } = await gw.newAccount('10')
      const { results } = await run(key, [
        structuredLine('valid', 'claude triage', {}, 'sim/claude'),
        structuredLine('prose', '[sim:not_json] claude triage', {}, 'sim/claude'),
        structuredLine('cut', 'claude triage', { max_tokens: 2 }, 'sim/claude'),
      ])
      expect(results.get('valid')).toMatchObject({ status: 'succeeded', provider: 'sim-anthropic' })
      expect(results.get('prose')).toMatchObject({
        status: 'failed',
        cost_usd: '0',
        error: { code: 'structured_output_invalid' },
      })
      expect(results.get('cut')!.status).toBe('succeeded')
      expect(new Decimal(results.get('cut')!.cost_usd).gt(0)).toBe(true)
      const sent = sim
        .received()
        .filter((r) => r.path === '/v1/messages' && r.text.includes('claude triage'))
        .map((r) => JSON.parse(r.text) as Record<string, unknown>)
      expect(sent).toHaveLength(3)
      for (const body of sent) {
        expect(body.output_config).toEqual({ format: { type: 'json_schema', schema: SCHEMA } })
        expect(body).not.toHaveProperty('response_format')
      }
    })

    test('the simulator-wide mode steers lines without a marker', async () => {
      const { key } = await gw.newAccount('10')
      sim.configure({ structuredAnswers: 'off_schema' })
      try {
        const { results } = await run(key, [
          structuredLine('steered', 'no marker'),
          structuredLine('marked', '[sim:valid] marker wins'),
        ])
        expect(results.get('steered')!.error?.code).toBe('structured_output_invalid')
        expect(results.get('marked')!.status).toBe('succeeded')
      } finally {
        sim.configure({ structuredAnswers: 'valid' })
      }
    })

    test('facade: the official openai package finds invalid structured answers in the error file with structured_output_invalid, valid ones in the output file', async () => {
      const { key } = await gw.newAccount('10')
      const openai = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, timeout: 20_000 })
      const file = await openai.files.create({
        file: await toFile(
          Buffer.from(
            jsonl([
              structuredLine('good', 'facade triage'),
              structuredLine('bad', '[sim:off_schema] facade triage'),
            ]),
          ),
          'structured.jsonl',
        ),
        purpose: 'batch',
      })
      const created = await openai.batches.create({
        input_file_id: file.id,
        endpoint: '/v1/chat/completions',
        completion_window: '24h',
      })
      const batch = await waitFor('facade batch', async () => {
        const b = await openai.batches.retrieve(created.id)
        return FINAL_BATCH.includes(b.status) ? b : null
      })
      expect(batch.status).toBe('completed')
      expect(contractProblems('Batch', batch)).toEqual([])
      expect(batch.request_counts).toMatchObject({ total: 2, completed: 1, failed: 1 })
      const errors = (await (await openai.files.content(batch.error_file_id!)).text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(errors).toHaveLength(1)
      expect(errors[0]).toMatchObject({
        custom_id: 'bad',
        error: { code: 'structured_output_invalid' },
        response: { status_code: 200 },
      })
      expect(errors[0].response.body.object).toBe('chat.completion')
      const output = (await (await openai.files.content(batch.output_file_id!)).text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l))
      expect(output.map((l: { custom_id: string }) => l.custom_id)).toEqual(['good'])
    })

    test('live calls: the answer passes unchecked and needs no max_tokens; guided_* and a schema that does not compile are refused', async () => {
      const { key } = await gw.newAccount('10')
      const openai = new OpenAI({ apiKey: key, baseURL: `${gw.url}/openai/v1`, maxRetries: 0 })
      const answer = await openai.chat.completions.create({
        model: 'sim/chat',
        messages: [{ role: 'user', content: '[sim:not_json] live' }],
        response_format: schemaFormat() as never,
      })
      expect(answer.choices[0].message.content).toStartWith('Sure!')
      const refusal = async (body: Record<string, unknown>) => {
        const response = await gw.request('/v1/chat/completions', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'sim/chat',
            messages: [{ role: 'user', content: 'hi' }],
            ...body,
          }),
        })
        expect(response.status).toBe(400)
        return ((await response.json()) as { error: { param: string; message: string } }).error
      }
      expect((await refusal({ guided_json: SCHEMA })).param).toBe('guided_json')
      const bad = await refusal({ response_format: schemaFormat({ type: 'strng' }) })
      expect(bad.param).toBe('response_format')
    })
  })
}
