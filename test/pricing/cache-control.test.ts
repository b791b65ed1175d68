/**
 * `cache_control` on a chat line (docs/pricing.md): accepted on a content part or a tool, for any model
 * (the Anthropic adapter passes it on, the others drop it); anything else is refused with its
 * path and what to send instead.
 */
import { expect, test } from 'bun:test'
import { createCatalog } from '../../src/catalog/catalog.ts'
import { loadConfig } from '../../src/config.ts'
import { convertMessagesToChat } from '../../providers/anthropic/convert-messages-to-chat.ts'
import { validateBody } from '../../src/ingest/validate-body.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'

const config = loadConfig({
  MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
  MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
})
const catalog = createCatalog(config.catalog, config.providerKeys)
const line = (model: string, cache: unknown, on: 'part' | 'tool' = 'part') => ({
  model,
  messages: [
    {
      role: 'user',
      content: [{ type: 'text', text: 'x', ...(on === 'part' ? { cache_control: cache } : {}) }],
    },
  ],
  ...(on === 'tool'
    ? { tools: [{ type: 'function', function: { name: 'f' }, cache_control: cache }] }
    : {}),
})

test('ephemeral, with or without a 5m/1h ttl, on a part or a tool, for Anthropic and OpenAI models', () => {
  for (const model of ['sim/claude', 'sim/chat'])
    for (const cache of [
      { type: 'ephemeral' },
      { type: 'ephemeral', ttl: '5m' },
      { type: 'ephemeral', ttl: '1h' },
    ])
      for (const on of ['part', 'tool'] as const)
        expect(validateBody(line(model, cache, on), 'chat', catalog, { prefix: 'body' }).ok).toBe(
          true,
        )
})

/** The test catalog with a 1-hour write rate of 50 on every offering. */
function withOneHourRates() {
  const file = testCatalog({ openai: 'http://127.0.0.1:9/v1' })
  for (const model of file.models)
    for (const offering of model.offerings as Record<string, unknown>[])
      offering.cache_write_1h_usd_per_mtok = '50'
  const rated = loadConfig({
    MULTIGRID_CONFIG: writeCatalog(file),
    MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
  })
  return createCatalog(rated.catalog, rated.providerKeys)
}

/** The input rate the ceiling of a chat body takes. */
function ceilingInputRate(body: unknown, catalog: ReturnType<typeof withOneHourRates>) {
  const verdict = validateBody(body, 'chat', catalog, { prefix: 'body' })
  if (!verdict.ok) throw new Error(verdict.problems[0].message)
  return verdict.value.rates.input.toFixed()
}

test('a 1-hour TTL raises the ceiling only where Anthropic bills it, whatever an OpenAI offering lists', () => {
  // A 1-hour write rate on every offering: OpenAI's can never be billed (its adapter drops cache_control).
  const withRates = withOneHourRates()
  const inputRate = (model: string, ttl: string) =>
    ceilingInputRate(line(model, { type: 'ephemeral', ttl }), withRates)
  expect(inputRate('sim/chat', '1h')).toBe(inputRate('sim/chat', '5m'))
  expect(inputRate('sim/claude', '1h')).toBe('50')
  expect(inputRate('sim/claude', '5m')).not.toBe('50')
})

test("a Messages request's 1-hour cache, on a system block, a text block or a tool, raises its ceiling as a chat line's does", () => {
  const withRates = withOneHourRates()
  const oneHour = { type: 'ephemeral', ttl: '1h' }
  const request = (on: 'system' | 'text' | 'tool' | 'none') => ({
    model: 'sim/claude',
    max_tokens: 16,
    system: [
      { type: 'text', text: 'Be brief.', ...(on === 'system' ? { cache_control: oneHour } : {}) },
    ],
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'x', ...(on === 'text' ? { cache_control: oneHour } : {}) },
        ],
      },
    ],
    tools: [
      {
        name: 'f',
        input_schema: { type: 'object' },
        ...(on === 'tool' ? { cache_control: oneHour } : {}),
      },
    ],
  })
  const rateOf = (on: 'system' | 'text' | 'tool' | 'none') => {
    const chat = convertMessagesToChat(request(on))
    if (!chat.ok) throw new Error(chat.message)
    return ceilingInputRate(chat.body, withRates)
  }
  for (const on of ['system', 'text', 'tool'] as const) expect(rateOf(on)).toBe('50')
  expect(rateOf('none')).not.toBe('50')
})

test('anything else is refused with its path and the fix', () => {
  const problem = (cache: unknown, on: 'part' | 'tool' = 'part') => {
    const verdict = validateBody(line('sim/claude', cache, on), 'chat', catalog, { prefix: 'body' })
    return verdict.ok ? null : verdict.problems[0]
  }
  expect(problem({ type: 'ephemeral', ttl: '2h' })).toMatchObject({
    path: 'body.messages.0.content.0.cache_control.ttl',
    fix: 'set body.messages.0.content.0.cache_control.ttl to "5m" or "1h"',
  })
  expect(problem({ type: 'persistent' }, 'tool')).toMatchObject({
    path: 'body.tools.0.cache_control.type',
  })
  expect(problem('yes')?.fix).toBe('set body.messages.0.content.0.cache_control to an object')
})

test("a Messages request's 1-hour cache where chat has no place for it (top level, tool_use, tool_result, a document) still raises its ceiling", () => {
  const withRates = withOneHourRates()
  const oneHour = { type: 'ephemeral', ttl: '1h' }
  type On = 'top' | 'tool_use' | 'tool_result' | 'document' | 'none'
  const marked = (on: On, here: On) => (on === here ? { cache_control: oneHour } : {})
  const request = (on: On) => ({
    model: 'sim/claude',
    max_tokens: 16,
    ...marked(on, 'top'),
    tools: [{ name: 'f', input_schema: { type: 'object' } }],
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'x' },
          ...(on === 'document'
            ? [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'd' } }]
            : []),
        ].map((block) =>
          block.type === 'document' ? { ...block, ...marked(on, 'document') } : block,
        ),
      },
      {
        role: 'assistant',
        content: [
          { type: 'tool_use', id: 'toolu_1', name: 'f', input: {}, ...marked(on, 'tool_use') },
        ],
      },
      {
        role: 'user',
        content: [
          {
            type: 'tool_result',
            tool_use_id: 'toolu_1',
            content: 'r',
            ...marked(on, 'tool_result'),
          },
        ],
      },
    ],
  })
  // As the routes take it: the translation, or outside its subset the lenient one (Anthropic's
  // offerings are sent the request as it came, cache_control and all).
  const rateOf = (on: On) => {
    const strict = convertMessagesToChat(request(on))
    const chat = strict.ok ? strict : convertMessagesToChat(request(on), { lenient: true })
    if (!chat.ok) throw new Error(chat.message)
    return ceilingInputRate(chat.body, withRates)
  }
  for (const on of ['top', 'tool_use', 'tool_result', 'document'] as const)
    expect({ on, rate: rateOf(on) }).toEqual({ on, rate: '50' })
  expect(rateOf('none')).not.toBe('50')
})
