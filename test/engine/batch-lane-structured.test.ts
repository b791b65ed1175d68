/**
 * Structured answers from the providers' batch APIs (docs/batch-lanes.md, docs/structured-outputs.md),
 * over HTTP against the simulator's OpenAI Batches and Anthropic Message Batches: a lane's answer is
 * judged as a live one is. Not JSON valid against its schema: failed structured_output_invalid, not
 * billed, the upstream body kept; valid, or cut at max_tokens: succeeded and billed; past the
 * judging budget: failed structured_output_unchecked and billed. The batch's cost and the
 * account's balance agree, and nothing stays held.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { laneCatalog } from '../helpers/lane-catalog.ts'
import { nativeClient } from '../helpers/native-client.ts'
import { bombSchema } from '../structured/hostile.ts'

interface Batch {
  id: string
  status: string
  cost_usd: string
  request_counts: Record<string, number>
}
interface Row {
  custom_id: string
  status: string
  provider: string | null
  cost_usd: string
  response: { body: { choices: { finish_reason: string; message: { content: string } }[] } } | null
  error: { code: string; message: string; upstream?: Record<string, unknown> } | null
}

/** An object with a required `a`, strict. */
const format = (schema: unknown = { type: 'object', properties: { a: {} }, required: ['a'] }) => ({
  type: 'json_schema',
  json_schema: { name: 'needs_a', schema, strict: true },
})

/** A structured line of `model`; `content` may carry a `[sim:…]` marker. */
const structured = (id: string, model: string, content: string, extra = {}) =>
  chatLine(id, content, { response_format: format(), max_tokens: 64, ...extra }, model)

for (const storeKind of STORES) {
  describe(`structured answers from batch lanes (${storeKind})`, () => {
    let openai: Simulator
    let anthropic: Simulator
    let gw: TestGateway

    beforeAll(async () => {
      openai = await startSimulator({ latencyMs: 2 })
      anthropic = await startSimulator({ latencyMs: 2, requireApiKey: 'sk-ant-test-secret' })
      for (const sim of [openai, anthropic]) sim.configure({ batchTurnaroundMs: 200 })
      gw = await startTestGateway({
        store: storeKind,
        catalog: laneCatalog(openai.url, anthropic.url),
        env: { MULTIGRID_POLL_MS: '20', MULTIGRID_SCHEMA_CHECK_MS: '100' },
      })
    })
    afterAll(async () => {
      await gw?.stop()
      await openai?.stop()
      await anthropic?.stop()
    })

    let key = ''
    const { submit, finished, results } = nativeClient<Batch, Row>(
      () => gw,
      () => key,
    )
    const account = async (id: string) =>
      (await (await gw.admin(`/accounts/${id}`)).json()) as {
        balance_usd: string
        held_usd: string
      }

    for (const [model, lane] of [
      ['lane/chat', 'sim:batch'],
      ['lane/claude', 'claude:batch'],
    ] as const) {
      test(`${model}: an answer invalid for its schema fails structured_output_invalid unbilled, a valid or cut one is billed, as live`, async () => {
        const created = await gw.newAccount('10', { rate_limit_per_minute: 100_000 })
        key = created.key
        const before = await account(created.accountId)
        // The simulator answers `[sim:answer]`'s content on its OpenAI side only.
        const bare = model === 'lane/chat' ? [structured('bare', model, '[sim:answer]"x"')] : []
        const batch = await submit(
          jsonl([
            ...bare,
            structured('prose', model, '[sim:not_json] triage this'),
            structured('shape', model, '[sim:off_schema] triage this'),
            structured('valid', model, 'triage this'),
            structured('cut', model, 'triage this', { max_tokens: 2 }),
          ]),
        )
        const ended = await finished(batch.id)
        const rows = new Map((await results(batch.id)).map((row) => [row.custom_id, row]))
        for (const row of rows.values()) expect(row.provider).toBe(lane)
        for (const id of ['prose', 'shape', ...bare.map((line) => line.custom_id)]) {
          const row = rows.get(id)!
          expect(row).toMatchObject({ status: 'failed', cost_usd: '0', response: null })
          expect(row.error!.code).toBe('structured_output_invalid')
          expect(row.error!.upstream).toBeDefined()
        }
        const valid = rows.get('valid')!
        expect(valid.status).toBe('succeeded')
        expect(valid.response!.body.choices[0]!.finish_reason).toBe('stop')
        expect(JSON.parse(valid.response!.body.choices[0]!.message.content)).toHaveProperty('a')
        expect(new Decimal(rows.get('valid')!.cost_usd).gt(0)).toBe(true)
        expect(rows.get('cut')!.status).toBe('succeeded')
        expect(rows.get('cut')!.response!.body.choices[0]!.finish_reason).toBe('length')
        expect(new Decimal(rows.get('cut')!.cost_usd).gt(0)).toBe(true)
        expect(ended.request_counts).toMatchObject({ succeeded: 2, failed: 2 + bare.length })
        const billed = [...rows.values()].reduce((sum, r) => sum.plus(r.cost_usd), new Decimal(0))
        expect(new Decimal(ended.cost_usd).eq(billed)).toBe(true)
        const after = await account(created.accountId)
        expect(new Decimal(before.balance_usd).minus(after.balance_usd).eq(billed)).toBe(true)
        expect(after.held_usd).toBe('0.000000')
      })
    }

    test('lane/chat: an answer whose check passes the budget fails structured_output_unchecked, billed, the answer kept', async () => {
      const created = await gw.newAccount('10', { rate_limit_per_minute: 100_000 })
      key = created.key
      const before = await account(created.accountId)
      const batch = await submit(
        jsonl([
          chatLine(
            'bomb',
            '[sim:answer]"x"',
            {
              response_format: format(bombSchema(21)),
              max_tokens: 16,
            },
            'lane/chat',
          ),
        ]),
      )
      const ended = await finished(batch.id)
      const [row] = await results(batch.id)
      expect(row).toMatchObject({ status: 'failed', provider: 'sim:batch' })
      expect(row!.error!.code).toBe('structured_output_unchecked')
      expect(row!.error!.upstream).toBeDefined()
      expect(new Decimal(row!.cost_usd).gt(0)).toBe(true)
      expect(new Decimal(ended.cost_usd).eq(row!.cost_usd)).toBe(true)
      const after = await account(created.accountId)
      expect(new Decimal(before.balance_usd).minus(after.balance_usd).eq(row!.cost_usd)).toBe(true)
      expect(after.held_usd).toBe('0.000000')
    })
  })
}
