/**
 * A line's `provider` object that leaves no offering is refused with what to send instead: an
 * offering named whose provider has no key names the variable to set (as a model whose only
 * provider has none does), beside the offerings it could allow.
 */
import { expect, test } from 'bun:test'
import { createCatalog } from '../../src/catalog/catalog.ts'
import { loadConfig } from '../../src/config.ts'
import { validateBody } from '../../src/ingest/validate-body.ts'
import { writeCatalog } from '../helpers/catalog.ts'

const offering = (provider: string) => ({
  provider,
  upstream_model: 'up-chat',
  input_usd_per_mtok: '1',
  output_usd_per_mtok: '2',
})
const config = loadConfig({
  MULTIGRID_CONFIG: writeCatalog({
    providers: {
      pool: { kind: 'openai', base_url: 'http://127.0.0.1:9/v1' },
      paid: { kind: 'openai', base_url: 'http://127.0.0.1:9/v1', api_key_env: 'MG_TEST_UNSET_KEY' },
    },
    models: [
      {
        id: 'both/chat',
        endpoints: ['chat'],
        context_tokens: 32_000,
        max_output_tokens: 1024,
        offerings: [offering('paid'), offering('pool')],
      },
    ],
  }),
})
const catalog = createCatalog(config.catalog, config.providerKeys)
// The same model with the keyed provider left out: its only provider has no key.
const unkeyedOnly = createCatalog(
  {
    ...config.catalog,
    models: [{ ...config.catalog.models[0]!, id: 'paid/chat', offerings: [offering('paid')] }],
  } as typeof config.catalog,
  config.providerKeys,
)
const body = { model: 'both/chat', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }
const problem = (provider: object) => {
  const verdict = validateBody({ ...body, provider }, 'chat', catalog, { prefix: 'body' })
  if (verdict.ok) throw new Error('accepted')
  return verdict.problems[0]
}

test('only a provider without its key: the fix names the variable to set', () => {
  const refused = problem({ only: ['paid'] })
  expect(refused.path).toBe('body.provider')
  expect(refused.message).toBe(
    'leaves no configured provider for both/chat: paid has no API key on this gateway',
  )
  expect(refused.fix).toBe('ask the operator to set MG_TEST_UNSET_KEY, or allow one of: pool')
  // A name that is no offering at all is told what there is, no key.
  expect(problem({ only: ['elsewhere'] }).fix).toBe('allow one of: pool')
  // The keyed one is served.
  expect(validateBody({ ...body, provider: { only: ['pool'] } }, 'chat', catalog).ok).toBe(true)
})

test('a model whose only provider has no key: the refusal reads after its path, and names the variable', () => {
  const verdict = validateBody({ ...body, model: 'paid/chat' }, 'chat', unkeyedOnly, {
    prefix: 'body',
  })
  if (verdict.ok) throw new Error('accepted')
  const [refused] = verdict.problems
  // As a live call's message puts it: "<path> <message>; <fix>".
  expect(`${refused!.path} ${refused!.message}; ${refused!.fix}`).toBe(
    'body.model names paid/chat, which no provider on this gateway is configured to serve; ask the operator to set MG_TEST_UNSET_KEY, or use another model',
  )
})

test('an unknown model is given examples that can run here, not one whose only provider has no key', () => {
  const both = createCatalog(
    {
      ...config.catalog,
      models: [
        { ...config.catalog.models[0]!, id: 'paid/chat', offerings: [offering('paid')] },
        config.catalog.models[0]!,
      ],
    } as typeof config.catalog,
    config.providerKeys,
  )
  const verdict = validateBody({ ...body, model: 'nowhere/chat' }, 'chat', both)
  if (verdict.ok) throw new Error('accepted')
  expect(verdict.problems[0]!.fix).toBe('use a model from GET /v1/models, for example both/chat')
})
