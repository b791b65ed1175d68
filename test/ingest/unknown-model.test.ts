/**
 * An unknown model's issue suggests the catalog's nearest names (another letter case, a typo or
 * two) rather than the first models of the catalog; with nothing near, the examples stay.
 */
import { expect, test } from 'bun:test'
import { join } from 'node:path'
import { createCatalog } from '../../src/catalog/catalog.ts'
import { editDistance, nearModelNames } from '../../src/catalog/near-model-names.ts'
import { loadConfig } from '../../src/config.ts'
import { validateBody } from '../../src/ingest/validate-body.ts'

const config = loadConfig({
  MULTIGRID_CONFIG: join(import.meta.dir, '../../providers/catalog.default.json'),
  OPENAI_API_KEY: 'sk-test',
  ANTHROPIC_API_KEY: 'sk-ant-test',
})
const catalog = createCatalog(config.catalog, config.providerKeys)

const fixFor = (model: string, endpoint: 'chat' | 'embeddings' = 'chat') => {
  const body =
    endpoint === 'chat'
      ? { model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }
      : { model, input: 'hi' }
  const verdict = validateBody(body, endpoint, catalog, { prefix: 'body' })
  if (verdict.ok) throw new Error(`${model} was accepted`)
  const problem = verdict.problems.find((p) => p.path === 'body.model')!
  expect(problem.code).toBe('model_not_found')
  expect(problem.message).toStartWith(`names an unknown model, "${model.slice(0, 20)}`)
  return problem.fix
}

test('another letter case: the name as the catalog spells it', () => {
  expect(fixFor('GPT-4o-mini')).toBe('did you mean gpt-4o-mini? GET /v1/models lists every model')
  expect(fixFor('OpenAI/GPT-4o-mini')).toStartWith('did you mean openai/gpt-4o-mini?')
})

test('a typo: the id or alias an edit or two away, only the nearest', () => {
  expect(fixFor('gpt-5-nan')).toStartWith('did you mean gpt-5-nano?')
  expect(fixFor('claude-haiku-4.5')).toStartWith('did you mean claude-haiku-4-5?')
  expect(fixFor('anthropic/claude-haiku-4.5')).toStartWith(
    'did you mean anthropic/claude-haiku-4-5?',
  )
  expect(fixFor('gtp-5-mini')).toStartWith('did you mean gpt-5-mini?') // two letters swapped
  expect(fixFor('text-embedding-3-smal', 'embeddings')).toStartWith(
    'did you mean text-embedding-3-small?',
  )
  expect(nearModelNames(catalog, 'claude-sonnet-4-1', 'chat')).toEqual(['claude-sonnet-4-5'])
  expect(nearModelNames(catalog, 'gpt5-nano', 'chat')).toEqual(['gpt-5-nano'])
  // A short name takes one edit only: gpt-4o is two from gpt-5.
  expect(nearModelNames(catalog, 'gpt-4o', 'chat')).toEqual([])
  // Only models of the endpoint asked for: an embeddings model is no fix for a chat body.
  expect(nearModelNames(catalog, 'text-embedding-3-smal', 'chat')).toEqual([])
})

test('no model that cannot run here is suggested: its provider has no key', () => {
  const noAnthropicKey = loadConfig({
    MULTIGRID_CONFIG: join(import.meta.dir, '../../providers/catalog.default.json'),
    OPENAI_API_KEY: 'sk-test',
  })
  const openaiOnly = createCatalog(noAnthropicKey.catalog, noAnthropicKey.providerKeys)
  expect(nearModelNames(openaiOnly, 'claude-haiku-4.5', 'chat')).toEqual([])
  expect(nearModelNames(openaiOnly, 'gpt5-nano', 'chat')).toEqual(['gpt-5-nano'])
})

test('nothing near: the examples of models that can run here', () => {
  expect(fixFor('llama-3-70b')).toBe(
    'use a model from GET /v1/models, for example openai/gpt-5-nano, openai/gpt-5-mini, openai/gpt-5',
  )
  expect(fixFor('x'.repeat(10_000))).toStartWith('use a model from GET /v1/models, for example')
})

test('the edit distance stops as soon as it passes its bound', () => {
  expect(editDistance('gpt-5-nan', 'gpt-5-nano', 2)).toBe(1)
  expect(editDistance('claude-haiku-4.5', 'CLAUDE-HAIKU-4-5', 2)).toBe(1)
  expect(editDistance('gtp', 'gpt', 1)).toBe(1)
  expect(editDistance('abcdef', 'uvwxyz', 2)).toBe(3)
  expect(editDistance('a', 'abcd', 2)).toBe(3)
})

test('a file that misspells one model on every line measures it once', () => {
  // Remembered per name: every later line gets the very list the first one measured.
  const first = nearModelNames(catalog, 'claude-haiku-4.5', 'chat')
  for (let i = 0; i < 1_000; i++)
    expect(nearModelNames(catalog, 'claude-haiku-4.5', 'chat')).toBe(first)
  // Many distinct names far from every model: nothing suggested, and the memory stays bounded
  // (past its size it starts over, so the first name is measured again: an equal, new list).
  for (let i = 0; i < 600; i++)
    expect(nearModelNames(catalog, `unknown-model-${i}`, 'chat')).toEqual([])
  const again = nearModelNames(catalog, 'claude-haiku-4.5', 'chat')
  expect(again).toEqual(first)
  expect(again).not.toBe(first)
})
