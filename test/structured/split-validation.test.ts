/**
 * Structured lines in a file validated on two threads (src/ingest/parallel-validation.ts): the
 * second half is checked in the validation thread and hands its schemas back with their own line
 * numbers; every distinct schema is then compiled once (src/ingest/file-schemas.ts), and its
 * warnings and issues land at their lines, in line order; over HTTP too, with a file big enough
 * for the gateway to split.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { createFileValidator } from '../../src/ingest/parallel-validation.ts'
import { chatLine, jsonl, startTestGateway } from '../helpers/gateway.ts'
import { splitValidator } from '../helpers/split-validator.ts'

const RECURSIVE = {
  type: 'json_schema',
  json_schema: {
    name: 'tree',
    schema: {
      $defs: {
        node: {
          type: 'object',
          properties: { kids: { type: 'array', items: { $ref: '#/$defs/node' } } },
        },
      },
      $ref: '#/$defs/node',
    },
  },
}
const FLAT = {
  type: 'json_schema',
  json_schema: { name: 'flat', schema: { type: 'object', properties: { a: { type: 'string' } } } },
}
const BROKEN = { type: 'json_schema', json_schema: { name: 'bad', schema: { type: 'strng' } } }
const PARAM = 'body.response_format.json_schema.schema.$defs.node.properties.kids.items.$ref'

/** `count` structured lines; the ones at `special` (1-based) get `format`, padded to `pad` bytes. */
function file(count: number, special: number[], format: unknown, pad = 0) {
  return jsonl(
    Array.from({ length: count }, (_, i) =>
      chatLine(`l${i + 1}`, 'x'.repeat(pad), {
        response_format: special.includes(i + 1) ? format : FLAT,
      }),
    ),
  )
}

const { config, catalog, validator, paths } = splitValidator()
const LIMITS = { maxLines: 100, maxCustomIdLength: 64 }
const encode = (text: string) => new TextEncoder().encode(text)

afterAll(() => validator.close())

describe('structured lines validated on two threads', () => {
  test('warnings from both halves, in line order', async () => {
    const bytes = encode(file(40, [3, 35], RECURSIVE))
    paths.length = 0
    const split = await validator.validate(bytes, LIMITS)
    expect(paths).toEqual(['split'])
    if (!split.ok) throw new Error('expected a clean file')
    expect(split.warnings.map((w) => [w.line, w.custom_id, w.param])).toEqual([
      [3, 'l3', PARAM],
      [35, 'l35', PARAM],
    ])
    expect(split.warningsOmitted).toBe(0)
    // One pass finds the same.
    const onePass = createFileValidator(catalog, config, { parallel: false })
    expect(await onePass.validate(bytes, LIMITS)).toMatchObject({ warnings: split.warnings })
    await onePass.close()
  })

  test('more than 25 warnings: 25 listed, the rest counted, across the halves', async () => {
    const all = Array.from({ length: 40 }, (_, i) => i + 1)
    const split = await validator.validate(encode(file(40, all, RECURSIVE)), LIMITS)
    if (!split.ok) throw new Error('expected a clean file')
    expect(split.warnings.map((w) => w.line)).toEqual(all.slice(0, 25))
    expect(split.warningsOmitted).toBe(15)
  })

  test('a schema that does not compile in the second half is an issue at its line', async () => {
    paths.length = 0
    const verdict = await validator.validate(encode(file(40, [38], BROKEN)), LIMITS)
    // Both halves are clean until their schemas are compiled, once each, after the split.
    expect(paths).toEqual(['split'])
    if (verdict.ok) throw new Error('expected issues')
    expect(verdict.issues.map((i) => [i.line, i.path])).toEqual([[38, 'body.response_format']])
  })

  test('over HTTP: a 1.2 MB dry run lists the warnings of both halves', async () => {
    const gw = await startTestGateway()
    try {
      const { key } = await gw.newAccount('100')
      const body = file(1200, [2, 1190], RECURSIVE, 900)
      expect(body.length).toBeGreaterThan(1024 * 1024)
      const response = await gw.request('/v1/batches?dry_run=true', key, {
        method: 'POST',
        headers: { 'content-type': 'application/jsonl' },
        body,
      })
      expect(response.status).toBe(200)
      const quote = (await response.json()) as { line_count: number; warnings: { line: number }[] }
      expect(quote.line_count).toBe(1200)
      expect(quote.warnings.map((w) => w.line)).toEqual([2, 1190])
    } finally {
      await gw.stop()
    }
  })
})
