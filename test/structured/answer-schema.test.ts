/**
 * The compiled answer schemas (src/schemas/answer-schema.ts) and the recursion finder
 * (src/schemas/schema-recursion.ts): drafts, what does not compile, schemas kept apart by their
 * ids, and which schemas recurse without end.
 */
import { describe, expect, test } from 'bun:test'
import { heapSize } from 'bun:jsc'
import { compileAnswerSchema } from '../../src/schemas/answer-schema.ts'
import { findLoop, findRecursion } from '../../src/schemas/schema-recursion.ts'

const compiled = (schema: Record<string, unknown>) => {
  const result = compileAnswerSchema(schema)
  if (!result.ok) throw new Error(result.message)
  return result.schema
}
const failure = (schema: Record<string, unknown>) => {
  const result = compileAnswerSchema(schema)
  return result.ok ? null : result.message
}

describe('answer schemas', () => {
  test('2020-12 by default; 2019-09 and draft-07 when $schema names them; others refused', () => {
    const tuple = compiled({ type: 'array', prefixItems: [{ type: 'integer' }] })
    expect(tuple.check([1])).toBeNull()
    expect(tuple.check(['x'])).toContain('must be integer')
    const draft7 = compiled({
      $schema: 'http://json-schema.org/draft-07/schema#',
      definitions: { n: { type: 'integer' } },
      items: [{ $ref: '#/definitions/n' }],
    })
    expect(draft7.check(['x'])).toContain('must be integer')
    expect(
      compiled({ $schema: 'https://json-schema.org/draft/2019-09/schema' }).check(1),
    ).toBeNull()
    expect(failure({ $schema: 'http://json-schema.org/draft-04/schema#' })).toContain('draft-07')
  })

  test('what does not compile says why; formats are not checked', () => {
    expect(failure({ type: 'strng' })).toContain('schema is invalid')
    expect(failure({ $ref: '#/$defs/missing' })).toContain('#/$defs/missing')
    expect(failure({ $ref: 'https://example.com/remote.json' })).toContain("can't resolve")
    expect(compiled({ type: 'string', format: 'email' }).check('not an email')).toBeNull()
  })

  test("one schema's ids are not reachable from another's, and may be reused; a meta-schema's id is refused and breaks nothing", () => {
    const first = compiled({
      $id: 'https://acme.example/secret',
      type: 'object',
      properties: { inner: { $id: 'https://acme.example/inner', type: 'string' } },
    })
    expect(first.check({ inner: 1 })).toContain('must be string')
    expect(failure({ $ref: 'https://acme.example/secret' })).toContain("can't resolve")
    expect(failure({ $ref: 'https://acme.example/inner' })).toContain("can't resolve")
    const reused = compiled({ $id: 'https://acme.example/secret', type: 'integer' })
    expect(reused.check(3)).toBeNull()
    expect(failure({ $id: 'https://json-schema.org/draft/2020-12/schema' })).toContain(
      'meta-schema',
    )
    expect(compiled({ type: 'object', required: ['a'] }).check({})).toContain('required')
  })

  test('a recursive schema compiles and judges nested answers', () => {
    const list = compiled({
      type: 'object',
      properties: { value: { type: 'integer' }, next: { $ref: '#' } },
      required: ['value'],
    })
    expect(list.check({ value: 1, next: { value: 2 } })).toBeNull()
    expect(list.check({ value: 1, next: { value: 'x' } })).toContain('/next/value')
    expect(list.recursion).toEqual(['properties', 'next', '$ref'])
  })
})

describe('unbounded recursion', () => {
  test('a $ref back to the root, through definitions, or through a cycle of definitions', () => {
    expect(findRecursion({ properties: { next: { $ref: '#' } } })).toEqual([
      'properties',
      'next',
      '$ref',
    ])
    expect(
      findRecursion({
        $defs: { node: { properties: { kids: { items: { $ref: '#/$defs/node' } } } } },
        $ref: '#/$defs/node',
      }),
    ).toEqual(['$defs', 'node', 'properties', 'kids', 'items', '$ref'])
    expect(
      findRecursion({
        definitions: {
          a: { properties: { b: { $ref: '#/definitions/b' } } },
          b: { anyOf: [{ $ref: '#/definitions/a' }, { type: 'null' }] },
        },
        $ref: '#/definitions/a',
      }),
    ).toEqual(['definitions', 'b', 'anyOf', '0', '$ref'])
    expect(
      findRecursion({ $defs: { n: { $anchor: 'n', items: { $ref: '#n' } } }, $ref: '#n' }),
    ).toEqual(['$defs', 'n', 'items', '$ref'])
  })

  test('none: shared definitions, a cycle no instance reaches, "$ref" inside data, external refs', () => {
    expect(
      findRecursion({
        $defs: { id: { type: 'string' } },
        properties: { a: { $ref: '#/$defs/id' }, b: { $ref: '#/$defs/id' } },
      }),
    ).toBeNull()
    expect(
      findRecursion({ $defs: { loop: { items: { $ref: '#/$defs/loop' } } }, type: 'string' }),
    ).toBeNull()
    expect(findRecursion({ enum: [{ $ref: '#' }], const: { $ref: '#' } })).toBeNull()
    expect(findRecursion({ $ref: 'https://example.com/tree.json' })).toBeNull()
  })

  test('a property may be called anything, "enum" and "$defs" too', () => {
    expect(findRecursion({ properties: { enum: { $ref: '#' } } })).toEqual([
      'properties',
      'enum',
      '$ref',
    ])
    expect(findRecursion({ properties: { $defs: { $ref: '#' } } })).toEqual([
      'properties',
      '$defs',
      '$ref',
    ])
  })
})

describe('loops no answer can be checked against', () => {
  test('a cycle through anyOf, allOf, not or $ref alone is refused at compile, quickly, naming where it closes', () => {
    const loops: [Record<string, unknown>, string[]][] = [
      [
        { $defs: { a: { anyOf: [{ $ref: '#/$defs/a' }] } }, $ref: '#/$defs/a' },
        ['$defs', 'a', 'anyOf', '0', '$ref'],
      ],
      [{ allOf: [{ $ref: '#' }] }, ['allOf', '0', '$ref']],
      [{ not: { $ref: '#' } }, ['not', '$ref']],
      [
        { $defs: { a: { $ref: '#/$defs/b' }, b: { $ref: '#/$defs/a' } }, $ref: '#/$defs/a' },
        ['$defs', 'b', '$ref'],
      ],
      // A branch that goes into the items does not save one that does not.
      [{ anyOf: [{ $ref: '#' }, { type: 'array', items: { $ref: '#' } }] }, ['anyOf', '0', '$ref']],
      // A loop met only under a property or an item: that value is checked without end.
      [
        {
          type: 'object',
          properties: { x: { $ref: '#/$defs/a' } },
          $defs: { a: { anyOf: [{ $ref: '#/$defs/a' }, { type: 'string' }] } },
        },
        ['$defs', 'a', 'anyOf', '0', '$ref'],
      ],
      [
        {
          items: { $ref: '#/$defs/a' },
          $defs: { a: { $ref: '#/$defs/b' }, b: { $ref: '#/$defs/a' } },
        },
        ['$defs', 'b', '$ref'],
      ],
    ]
    for (const [schema, site] of loops) {
      expect(findLoop(schema)).toEqual(site)
      const started = performance.now()
      expect(failure(schema)).toBe(
        `${site.join('.')} leads back to a schema it is in without going into a property or an item, so checking an answer against it would never end`,
      )
      expect(performance.now() - started).toBeLessThan(100)
    }
  })

  test('recursion through a property or an item is no loop: it compiles; nor is a loop no answer meets', () => {
    const schemas = [
      { $defs: { loop: { anyOf: [{ $ref: '#/$defs/loop' }] } }, type: 'string' },
      { properties: { next: { $ref: '#' } } },
      { anyOf: [{ type: 'null' }, { type: 'array', items: { $ref: '#' } }] },
      {
        $defs: {
          node: { type: 'object', properties: { kids: { items: { $ref: '#/$defs/node' } } } },
        },
        allOf: [{ $ref: '#/$defs/node' }],
      },
    ]
    for (const schema of schemas) {
      expect(findLoop(schema)).toBeNull()
      expect(failure(schema)).toBeNull()
    }
  })
})

describe('compiled schemas in memory', () => {
  test("distinct schemas do not grow a thread's memory without bound: Ajv's instances are made afresh past a weight", () => {
    // Each schema: 100 distinct patterns of about 2,000 RE2 instructions, some 40 MB in Ajv's
    // scope (its JavaScript heap alone over 20 MB), which removing the schema does not free: 20 of
    // them kept some 430 MB of heap before.
    const schemaOf = (i: number) => ({
      type: 'object',
      properties: Object.fromEntries(
        Array.from({ length: 100 }, (_, j) => [
          `p${j}`,
          { type: 'string', pattern: `^(a{1,1000}b)${i}x${j}$` },
        ]),
      ),
    })
    Bun.gc(true)
    const before = heapSize()
    for (let i = 0; i < 20; i++) compiled(schemaOf(i))
    Bun.gc(true)
    expect(heapSize() - before).toBeLessThan(150 * 1024 * 1024)
    // Still judges, the one compiled as the instances were dropped too.
    const last = compiled(schemaOf(19))
    expect(last.check({ p0: 'aab19x0' })).toBeNull()
    expect(last.check({ p0: 'ab' })).toContain('must match pattern')
  }, 60_000)
})
