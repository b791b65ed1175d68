/**
 * The bounds of docs/structured-outputs.md on a response_format schema, checked before it is compiled: each bound
 * at its limit is accepted and one past it refused, naming the bound and its fix, as a batch
 * line's issue and as a live call's 400; the walk takes any depth without overflowing.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { SCHEMA_BOUNDS, schemaBoundProblem } from '../../src/schemas/schema-bounds.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { schemaFormat } from './hostile.ts'

const objectWith = (count: number, prefix = 'p') => ({
  type: 'object',
  properties: Object.fromEntries(
    Array.from({ length: count }, (_, i) => [`${prefix}${i}`, { type: 'string' }]),
  ),
})
/** `levels` object schemas inside the root, each the only property of the one above. */
function nested(levels: number) {
  let schema: Record<string, unknown> = { type: 'string' }
  for (let i = 0; i < levels; i++) schema = { type: 'object', properties: { a: schema } }
  return schema
}
const withEnum = (count: number) => ({ enum: Array.from({ length: count }, (_, i) => `v${i}`) })
function withDefs(count: number) {
  const $defs: Record<string, unknown> = {}
  const definitions: Record<string, unknown> = {}
  // Split between the two keywords: they count together.
  for (let i = 0; i < count; i++) (i % 2 ? definitions : $defs)[`d${i}`] = { type: 'string' }
  return { $defs, definitions, type: 'string' }
}
const big = (bytes: number) => ({ type: 'string', description: 'x'.repeat(bytes - 40) })

/** Each bound: a schema right at it, one past it, and the words its refusal must carry. */
const CASES = [
  {
    bound: 'bytes',
    at: big(SCHEMA_BOUNDS.bytes),
    past: big(SCHEMA_BOUNDS.bytes + 100),
    words: ['64 KiB'],
  },
  {
    bound: 'properties',
    at: objectWith(1000),
    past: { allOf: [objectWith(600), objectWith(401, 'q')] },
    words: ['1,000 properties'],
  },
  { bound: 'nesting', at: nested(10), past: nested(11), words: ['10 levels of nesting'] },
  {
    bound: 'enumValues',
    at: withEnum(1000),
    past: { anyOf: [withEnum(500), withEnum(501)] },
    words: ['1,000 enum values'],
  },
  {
    bound: 'definitions',
    at: withDefs(100),
    past: withDefs(101),
    words: ['100 $defs', 'definitions'],
  },
] as const

describe('schema bounds (docs/structured-outputs.md)', () => {
  test('each bound: at it accepted, past it refused with its name', () => {
    for (const { bound, at, past } of CASES) {
      expect(schemaBoundProblem(at, JSON.stringify(at))).toBeNull()
      expect(schemaBoundProblem(past, JSON.stringify(past))?.bound).toBe(bound)
    }
  })

  test('the walk takes 100,000 levels without overflowing the stack', () => {
    let deep: Record<string, unknown> = {}
    for (let i = 0; i < 100_000; i++) deep = { items: deep }
    expect(schemaBoundProblem(deep, '{}')?.bound).toBe('nesting')
  })

  describe('over HTTP', () => {
    let gw: TestGateway
    let key: string
    beforeAll(async () => {
      gw = await startTestGateway()
      key = (await gw.newAccount('10')).key
    })
    afterAll(() => gw?.stop())

    test('a batch line past a bound is an issue at body.response_format.json_schema.schema naming it; at the bounds, the file is admitted', async () => {
      const line = (id: string, schema: unknown) =>
        chatLine(id, 'hi', { response_format: schemaFormat(schema), max_tokens: 16 })
      const refused = await gw.request('/v1/batches?dry_run=true', key, {
        method: 'POST',
        headers: { 'content-type': 'application/jsonl' },
        body: jsonl(CASES.map((c) => line(c.bound, c.past))),
      })
      expect(refused.status).toBe(400)
      const { issues } = (await refused.json()) as {
        issues: { line: number; custom_id: string; path: string; message: string; fix: string }[]
      }
      expect(issues.map((i) => [i.line, i.custom_id, i.path])).toEqual(
        CASES.map((c, i) => [i + 1, c.bound, 'body.response_format.json_schema.schema']),
      )
      CASES.forEach(({ words }, i) => {
        for (const word of words) expect(issues[i].message).toContain(word)
        expect(issues[i].fix).toContain('at most')
      })
      const accepted = await gw.request('/v1/batches?dry_run=true', key, {
        method: 'POST',
        headers: { 'content-type': 'application/jsonl' },
        body: jsonl(CASES.map((c) => line(c.bound, c.at))),
      })
      if (accepted.status !== 200) console.log((await accepted.text()).slice(0, 800))
      expect(accepted.status).toBe(200)
    })

    test('a live call past a bound is a 400 invalid_request_error naming it', async () => {
      for (const { past, words } of CASES) {
        const response = await gw.request('/v1/chat/completions', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'sim/chat',
            messages: [{ role: 'user', content: 'hi' }],
            response_format: schemaFormat(past),
          }),
        })
        expect(response.status).toBe(400)
        const { error } = (await response.json()) as {
          error: { type: string; message: string; param: string }
        }
        expect(error.type).toBe('invalid_request_error')
        expect(error.param).toBe('response_format.json_schema.schema')
        for (const word of words) expect(error.message).toContain(word)
      }
    })
  })

  describe('over HTTP, a budget of 10 ms', () => {
    test('a schema within the bounds whose compile passes its budget is refused as too complex, in a batch and on a live call', async () => {
      // 400 distinct patterns RE2 takes ~5 ms each to compile (more on a busy machine): 2 s, far
      // past 10 budgets of 10 ms.
      const properties = Object.fromEntries(
        Array.from({ length: 400 }, (_, i) => [
          `p${i}`,
          { type: 'string', pattern: `^x${i}([a-z]{1,30}){1,30}$` },
        ]),
      )
      const slow = { type: 'object', properties }
      expect(schemaBoundProblem(slow, JSON.stringify(slow))).toBeNull()
      const tight = await startTestGateway({ env: { MULTIGRID_SCHEMA_CHECK_MS: '10' } })
      const { key } = await tight.newAccount('10')
      const refused = await tight.request('/v1/batches?dry_run=true', key, {
        method: 'POST',
        headers: { 'content-type': 'application/jsonl' },
        body: jsonl([
          chatLine('slow', 'hi', { response_format: schemaFormat(slow), max_tokens: 16 }),
        ]),
      })
      expect(refused.status).toBe(400)
      const { issues } = (await refused.json()) as { issues: { path: string; message: string }[] }
      expect(issues).toEqual([
        expect.objectContaining({
          path: 'body.response_format',
          message: expect.stringContaining('too complex'),
        }),
      ])
      const live = await tight.request('/v1/chat/completions', key, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: 'sim/chat',
          messages: [{ role: 'user', content: 'hi' }],
          response_format: schemaFormat(slow),
        }),
      })
      expect(live.status).toBe(400)
      const { error } = (await live.json()) as { error: { type: string; message: string } }
      expect(error.type).toBe('invalid_request_error')
      expect(error.message).toContain('too complex')
      await tight.stop()
    })
  })
})
