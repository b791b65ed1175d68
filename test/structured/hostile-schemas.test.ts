/**
 * Tenants' schemas that would stall the event loop (docs/structured-outputs.md, issue 23 item 1), over real HTTP with
 * the simulator as upstream (`[sim:answer]` picks the answer's content): a 21-level `$ref` bomb
 * judged against "x" ends structured_output_unchecked and is billed while /healthz, a live call and
 * another account's batch go on; a catastrophic-backtracking pattern is judged by RE2 at once; lookaround
 * is refused; 2,000 distinct schemas in a dry run stall no one.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'
import { bombSchema, schemaFormat, watchHealth } from './hostile.ts'

interface ResultLine {
  custom_id: string
  status: string
  error: {
    code: string
    message: string
    upstream?: { choices: unknown[]; usage: Record<string, number> }
  } | null
  cost_usd: string
}

for (const storeKind of STORES) {
  describe(`hostile schemas (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway

    beforeAll(async () => {
      sim = await startSimulator({})
      gw = await startTestGateway({
        store: storeKind,
        upstreams: { openai: `${sim.url}/v1` },
        env: { MULTIGRID_POLL_MS: '50', MULTIGRID_SCHEMA_CHECK_MS: '100' },
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
    async function finished(key: string, id: string) {
      await waitFor(`batch ${id}`, async () => {
        const body = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
          status: string
        }
        return FINAL_BATCH.includes(body.status) ? body : null
      })
      const text = await (await gw.request(`/v1/batches/${id}/results`, key)).text()
      return text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as ResultLine)
    }
    const balance = async (accountId: string) =>
      new Decimal(
        ((await (await gw.admin(`/accounts/${accountId}`)).json()) as { balance_usd: string })
          .balance_usd,
      )

    test('a 21-level $ref bomb judged against "x" ends structured_output_unchecked, billed, with the upstream body; /healthz, a live call and another account\'s batch go on meanwhile', async () => {
      const attacker = await gw.newAccount('10')
      const other = await gw.newAccount('10')
      const before = await balance(attacker.accountId)
      const bombs = Array.from({ length: 6 }, (_, i) =>
        chatLine(`bomb-${i}`, '[sim:answer]"x"', {
          response_format: schemaFormat(bombSchema(21)),
          max_tokens: 16,
        }),
      )
      const health = watchHealth(gw.url)
      const created = await submit(attacker.key, bombs)
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: string }
      const started = Date.now()
      const small = await submit(
        other.key,
        Array.from({ length: 20 }, (_, i) => chatLine(`small-${i}`, 'hello')),
      )
      expect(small.status).toBe(201)
      // A live call of the other account, while the bombs are judged.
      const liveStarted = performance.now()
      const live = await gw.request('/v1/chat/completions', other.key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'sim/chat', messages: [{ role: 'user', content: 'hi' }] }),
      })
      const liveMs = performance.now() - liveStarted
      expect(live.status).toBe(200)
      const smallResults = await finished(other.key, ((await small.json()) as { id: string }).id)
      const smallMs = Date.now() - started
      const results = await finished(attacker.key, id)
      const worstHealthMs = await health.stop()

      expect(smallResults.every((r) => r.status === 'succeeded')).toBe(true)
      for (const line of results) {
        expect(line.status).toBe('failed')
        expect(line.error!.code).toBe('structured_output_unchecked')
        expect(line.error!.message).toContain('MULTIGRID_SCHEMA_CHECK_MS')
        expect(line.error!.upstream!.choices).toHaveLength(1)
        expect(new Decimal(line.cost_usd).greaterThan(0)).toBe(true)
      }
      const billed = results.reduce((sum, r) => sum.plus(r.cost_usd), new Decimal(0))
      expect(before.minus(await balance(attacker.accountId)).toFixed(6)).toBe(billed.toFixed(6))
      // Billed, so counted in the facade's usage too: the tokens of the answers kept.
      const facade = (await (
        await gw.request(`/openai/v1/batches/${id}`, attacker.key)
      ).json()) as { usage: { input_tokens: number; output_tokens: number } }
      const upstream = results.map((r) => r.error!.upstream!.usage)
      expect(facade.usage.input_tokens).toBe(
        upstream.reduce((sum, usage) => sum + usage.prompt_tokens, 0),
      )
      expect(facade.usage.output_tokens).toBe(
        upstream.reduce((sum, usage) => sum + usage.completion_tokens, 0),
      )
      expect(facade.usage.output_tokens).toBeGreaterThan(0)
      // The old judging held the event loop 2.7–5.2 s per bomb line (issue 23).
      expect(worstHealthMs).toBeLessThan(1000)
      expect(liveMs).toBeLessThan(1000)
      expect(smallMs).toBeLessThan(10_000)
      console.log(
        `bomb: /healthz worst ${worstHealthMs.toFixed(0)} ms; a live call ${liveMs.toFixed(0)} ms; other account's 20 lines in ${smallMs} ms`,
      )
    })

    test('items with pattern ^(a+)+$ against 30 a then ! is judged by RE2 within the budget: structured_output_invalid, unbilled; a matching answer succeeds', async () => {
      const { key } = await gw.newAccount('10')
      const schema = { type: 'array', items: { type: 'string', pattern: '^(a+)+$' } }
      const negated = { type: 'array', items: { not: { type: 'string', pattern: '^(a+)+$' } } }
      const evil = JSON.stringify(['a'.repeat(30) + '!'])
      const line = (id: string, answer: string, s: unknown) =>
        chatLine(id, `[sim:answer]${answer}`, { response_format: schemaFormat(s), max_tokens: 16 })
      const created = await submit(key, [
        line('evil', evil, schema),
        line('evil-not', JSON.stringify(['a'.repeat(30)]), negated),
        line('fine', JSON.stringify(['aaaa']), schema),
      ])
      expect(created.status).toBe(201)
      const results = await finished(key, ((await created.json()) as { id: string }).id)
      const by = new Map(results.map((r) => [r.custom_id, r]))
      // Judged, not cut at the budget: a backtracking engine takes ~0.4 s on the first.
      for (const id of ['evil', 'evil-not']) {
        expect(by.get(id)).toMatchObject({ status: 'failed', cost_usd: '0' })
        expect(by.get(id)!.error!.code).toBe('structured_output_invalid')
      }
      expect(by.get('evil')!.error!.message).toContain('must match pattern "^(a+)+$"')
      expect(by.get('fine')!.status).toBe('succeeded')
    })

    test('a lookahead or a backreference in pattern or patternProperties is an issue naming the pattern; a live call gets a 400', async () => {
      const { key } = await gw.newAccount('10')
      const line = (id: string, s: unknown) =>
        chatLine(id, 'hi', { response_format: schemaFormat(s), max_tokens: 16 })
      const response = await submit(key, [
        line('ahead', { type: 'string', pattern: '^(?=a)a+$' }),
        line('back', { type: 'string', pattern: '(a)\\1' }),
        line('props', { type: 'object', patternProperties: { '^(?!x)': { type: 'string' } } }),
        line('ok', { type: 'string', pattern: '^[a-z]+\\d{2,4}$' }),
      ])
      expect(response.status).toBe(400)
      const { issues } = (await response.json()) as {
        issues: { line: number; path: string; message: string; fix: string }[]
      }
      expect(issues.map((i) => [i.line, i.path])).toEqual([
        [1, 'body.response_format'],
        [2, 'body.response_format'],
        [3, 'body.response_format'],
      ])
      expect(issues[0].message).toContain('"^(?=a)a+$" is not RE2 syntax')
      expect(issues[1].message).toContain('(a)\\\\1')
      expect(issues[2].message).toContain('^(?!x)')
      for (const issue of issues) expect(issue.fix).toContain('RE2 syntax')

      const live = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'sim/chat',
          messages: [{ role: 'user', content: 'hi' }],
          response_format: schemaFormat({ type: 'string', pattern: '(?<=a)b' }),
        }),
      })
      expect(live.status).toBe(400)
      const { error } = (await live.json()) as {
        error: { type: string; message: string; param: string }
      }
      expect(error.type).toBe('invalid_request_error')
      expect(error.param).toBe('response_format')
      expect(error.message).toContain('"(?<=a)b" is not RE2 syntax')
    })

    test('a schema that loops without going into a property or an item is refused at validation, never judged and billed as unchecked', async () => {
      const { key } = await gw.newAccount('10')
      const loop = { $defs: { a: { anyOf: [{ $ref: '#/$defs/a' }] } }, $ref: '#/$defs/a' }
      const response = await submit(key, [
        chatLine('loop', 'hi', { response_format: schemaFormat(loop), max_tokens: 16 }),
      ])
      expect(response.status).toBe(400)
      const { issues } = (await response.json()) as {
        issues: { path: string; message: string; fix: string }[]
      }
      expect(issues[0].path).toBe('body.response_format')
      expect(issues[0].message).toContain(
        '$defs.a.anyOf.0.$ref leads back to a schema it is in without going into a property or an item',
      )
      expect(issues[0].fix).toContain('only through a property or an item')
      const live = await gw.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'sim/chat',
          max_tokens: 16,
          messages: [{ role: 'user', content: 'hi' }],
          response_format: schemaFormat({ not: { $ref: '#' } }),
        }),
      })
      expect(live.status).toBe(400)
      const { error } = (await live.json()) as { error: { message: string; param: string } }
      expect(error.param).toBe('response_format')
      expect(error.message).toContain('not.$ref leads back to a schema it is in')
    })

    test('a free dry run of 2,000 distinct 30-property schemas is quoted while /healthz keeps answering', async () => {
      const { key } = await gw.newAccount('0')
      const lines = Array.from({ length: 2000 }, (_, i) => {
        const properties: Record<string, unknown> = {}
        for (let p = 0; p < 30; p++) properties[`f${i}_${p}`] = { type: 'string', maxLength: p + 1 }
        return chatLine(`s${i}`, 'hi', {
          response_format: schemaFormat({ type: 'object', properties, required: ['f0_0'] }),
          max_tokens: 16,
        })
      })
      const health = watchHealth(gw.url)
      const started = Date.now()
      const response = await submit(key, lines, '?dry_run=true')
      const tookMs = Date.now() - started
      const worstHealthMs = await health.stop()
      const quote = await response.json()
      if (response.status !== 200) console.log(JSON.stringify(quote).slice(0, 1500))
      expect(response.status).toBe(200)
      expect(quote).toMatchObject({ line_count: 2000, credit_sufficient: false })
      // Compiling them stalled the loop 4–5 s (issue 23); what is left on it is reading and
      // checking half of a 3 MB file (the validation thread takes the other half), which on a
      // 2-core machine shared with other work has taken up to ~0.9 s.
      expect(worstHealthMs).toBeLessThan(2000)
      console.log(
        `2,000 schemas: dry run ${tookMs} ms, /healthz worst ${worstHealthMs.toFixed(0)} ms`,
      )
    })
  })
}
