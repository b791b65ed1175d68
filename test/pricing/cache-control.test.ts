/**
 * `cache_control` on a chat line (docs/pricing.md): accepted on a content part or a tool, for any model
 * (the Anthropic adapter passes it on, the others drop it); anything else is refused with its
 * path and what to send instead.
 */
import { expect, test } from 'bun:test'
import { createCatalog } from '../../src/catalog/catalog.ts'
import { loadConfig } from '../../src/config.ts'
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

test('a 1-hour TTL raises the ceiling only where Anthropic bills it, whatever an OpenAI offering lists', () => {
  const file = testCatalog({ openai: 'http://127.0.0.1:9/v1' })
  // A 1-hour write rate on every offering: OpenAI's can never be billed (its adapter drops cache_control).
  for (const model of file.models)
    for (const offering of model.offerings as Record<string, unknown>[])
      offering.cache_write_1h_usd_per_mtok = '50'
  const rated = loadConfig({
    MULTIGRID_CONFIG: writeCatalog(file),
    MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
  })
  const withRates = createCatalog(rated.catalog, rated.providerKeys)
  const inputRate = (model: string, ttl: string) => {
    const verdict = validateBody(line(model, { type: 'ephemeral', ttl }), 'chat', withRates, {
      prefix: 'body',
    })
    if (!verdict.ok) throw new Error(verdict.problems[0].message)
    return verdict.value.rates.input.toFixed()
  }
  expect(inputRate('sim/chat', '1h')).toBe(inputRate('sim/chat', '5m'))
  expect(inputRate('sim/claude', '1h')).toBe('50')
  expect(inputRate('sim/claude', '5m')).not.toBe('50')
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
