/**
 * The simulator's structured answers (src/simulator/structured-reply.ts) over HTTP: valid JSON for
 * the request's schema (judged by the gateway's own compiled schema), prose, JSON off the schema,
 * and a cut at max_tokens; steered by configure() or by a marker per request.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { compileAnswerSchema } from '../../src/schemas/answer-schema.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { instanceOf } from '../../src/simulator/structured-reply.ts'

const SCHEMAS: Record<string, Record<string, unknown>> = {
  flat: {
    type: 'object',
    properties: { label: { enum: ['a', 'b'] }, score: { type: 'integer', minimum: 3, maximum: 9 } },
    required: ['label', 'score'],
    additionalProperties: false,
  },
  tree: {
    $defs: {
      node: {
        type: 'object',
        properties: {
          name: { type: 'string', minLength: 2, maxLength: 12 },
          children: { type: 'array', items: { $ref: '#/$defs/node' }, maxItems: 2 },
        },
        required: ['name', 'children'],
      },
    },
    $ref: '#/$defs/node',
  },
  list: {
    type: 'array',
    items: { anyOf: [{ type: 'number', exclusiveMinimum: 10 }, { type: 'string' }] },
    minItems: 3,
  },
  nullable: {
    type: 'object',
    properties: { when: { type: ['null', 'string'] }, ok: { type: 'boolean' } },
    required: ['when', 'ok'],
  },
}

describe('simulator: structured answers', () => {
  let sim: Simulator
  beforeAll(async () => {
    sim = await startSimulator()
  })
  afterAll(() => sim.stop())

  async function chat(body: Record<string, unknown>) {
    const response = await fetch(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sim-chat', ...body }),
    })
    expect(response.status).toBe(200)
    return (await response.json()) as {
      choices: { message: { content: string }; finish_reason: string }[]
      usage: { completion_tokens: number }
    }
  }
  const ask = (content: string, schema: unknown, max_tokens = 200) =>
    chat({
      messages: [{ role: 'user', content }],
      max_tokens,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema } },
    })

  test('valid (the default): JSON valid for each schema, stopped on its own', async () => {
    for (const [name, schema] of Object.entries(SCHEMAS)) {
      const answer = await ask(`give ${name}`, schema)
      expect(answer.choices[0].finish_reason).toBe('stop')
      const compiled = compileAnswerSchema(schema)
      if (!compiled.ok) throw new Error(compiled.message)
      expect([name, compiled.schema.check(JSON.parse(answer.choices[0].message.content))]).toEqual([
        name,
        null,
      ])
    }
    const object = await chat({
      messages: [{ role: 'user', content: 'anything' }],
      response_format: { type: 'json_object' },
    })
    expect(JSON.parse(object.choices[0].message.content)).toEqual({
      reply: expect.stringContaining('sim reply to anything'),
    })
  })

  test('markers: not_json is no JSON, off_schema is JSON the schema refuses', async () => {
    const prose = await ask('[sim:not_json] flat', SCHEMAS.flat)
    expect(prose.choices[0].finish_reason).toBe('stop')
    expect(() => JSON.parse(prose.choices[0].message.content)).toThrow()
    const compiled = compileAnswerSchema(SCHEMAS.flat)
    if (!compiled.ok) throw new Error(compiled.message)
    const off = await ask('[sim:off_schema] flat', SCHEMAS.flat)
    expect(compiled.schema.check(JSON.parse(off.choices[0].message.content))).not.toBeNull()
  })

  test('cut at max_tokens: finish_reason length, exactly max_tokens completion tokens, broken JSON', async () => {
    const answer = await ask('flat', SCHEMAS.flat, 2)
    expect(answer.choices[0].finish_reason).toBe('length')
    expect(answer.usage.completion_tokens).toBe(2)
    expect(() => JSON.parse(answer.choices[0].message.content)).toThrow()
  })

  test('configure() sets the mode for requests without a marker; a marker still wins', async () => {
    sim.configure({ structuredAnswers: 'not_json' })
    try {
      const steered = await ask('flat', SCHEMAS.flat)
      expect(() => JSON.parse(steered.choices[0].message.content)).toThrow()
      const marked = await ask('[sim:valid] flat', SCHEMAS.flat)
      expect(JSON.parse(marked.choices[0].message.content)).toEqual({ label: 'a', score: 3 })
    } finally {
      sim.configure({ structuredAnswers: 'valid' })
    }
  })

  test("Anthropic: output_config.format's schema is answered the same way, max_tokens → stop_reason max_tokens", async () => {
    const message = async (content: string, max_tokens: number) => {
      const response = await fetch(`${sim.url}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({
          model: 'claude-sim',
          max_tokens,
          messages: [{ role: 'user', content }],
          output_config: { format: { type: 'json_schema', schema: SCHEMAS.flat } },
        }),
      })
      return (await response.json()) as { content: { text: string }[]; stop_reason: string }
    }
    const valid = await message('flat', 100)
    expect(valid.stop_reason).toBe('end_turn')
    expect(JSON.parse(valid.content[0].text)).toEqual({ label: 'a', score: 3 })
    expect((await message('flat', 1)).stop_reason).toBe('max_tokens')
  })
})

test('a schema whose $refs double at every level gets an answer at once, not after 2^N steps', () => {
  // d0 … d99, each the allOf of two $refs to the next: 2^99 paths through the definitions.
  const $defs: Record<string, unknown> = { d99: { type: 'string' } }
  for (let i = 0; i < 99; i++)
    $defs[`d${i}`] = { allOf: [{ $ref: `#/$defs/d${i + 1}` }, { $ref: `#/$defs/d${i + 1}` }] }
  const schema = {
    type: 'object',
    properties: { a: { $ref: '#/$defs/d0' } },
    required: ['a'],
    $defs,
  }
  const started = performance.now()
  const value = instanceOf(schema, schema, 'text', 0) as Record<string, unknown>
  expect(performance.now() - started).toBeLessThan(1_000)
  expect(Object.keys(value)).toEqual(['a'])
})

test('a minItems or minLength of a billion gets a bounded answer at once, not a process grown past memory', () => {
  const started = performance.now()
  const list = { type: 'array', minItems: 1_000_000_000, items: { type: 'string' } }
  // Within the node budget; the nodes past it are what is left, null.
  expect((instanceOf(list, list, 'text', 0) as unknown[]).length).toBeLessThanOrEqual(10_000)
  const text = { type: 'string', minLength: 1_000_000_000 }
  expect((instanceOf(text, text, 'text', 0) as string).length).toBe(65_536)
  expect(performance.now() - started).toBeLessThan(1_000)
})
