/**
 * A batch line's ceiling is a true bound where it may go to a provider's batch API (docs/batch-lanes.md): the
 * lane's prices count with the live lanes', whichever is dearer; a live call never goes to a
 * batch lane, so its ceiling is the live lanes' alone.
 */
import { expect, test } from 'bun:test'
import { createCatalog } from '../../src/catalog/catalog.ts'
import { loadConfig } from '../../src/config.ts'
import { validateBody } from '../../src/ingest/validate-body.ts'
import { writeCatalog } from '../helpers/catalog.ts'

const offering = (input: string, output: string, lane?: 'batch') => ({
  provider: 'sim',
  upstream_model: 'sim-chat',
  input_usd_per_mtok: input,
  output_usd_per_mtok: output,
  ...(lane && { lane }),
})
const config = loadConfig({
  MULTIGRID_CONFIG: writeCatalog({
    providers: { sim: { kind: 'openai', base_url: 'http://127.0.0.1:9/v1' } },
    models: [
      {
        id: 'lane/dear',
        endpoints: ['chat'],
        context_tokens: 32_000,
        max_output_tokens: 1024,
        // An unusual catalog: the batch lane dearer than the live lane.
        offerings: [offering('0.5', '1'), offering('1', '2', 'batch')],
      },
      {
        id: 'lane/cheap',
        endpoints: ['chat'],
        context_tokens: 32_000,
        max_output_tokens: 1024,
        offerings: [offering('1', '4'), offering('0.5', '2', 'batch')],
      },
    ],
  }),
})
const catalog = createCatalog(config.catalog, config.providerKeys)
const body = { model: 'lane/dear', messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 }

test("a batch line's ceiling counts its batch lane's prices; a live call's does not", () => {
  const rates = (live: boolean) => {
    const verdict = validateBody(body, 'chat', catalog, { prefix: 'body', live })
    if (!verdict.ok) throw new Error(verdict.problems[0].message)
    return [verdict.value.rates.input.toFixed(), verdict.value.rates.output.toFixed()]
  }
  expect(rates(false)).toEqual(['1', '2'])
  expect(rates(true)).toEqual(['0.5', '1'])
})

test('a routing that leaves a batch lane alone is refused for that, and only then', () => {
  const problem = (provider: object, model = 'lane/cheap') => {
    const verdict = validateBody({ ...body, model, provider }, 'chat', catalog, { prefix: 'body' })
    if (verdict.ok) throw new Error('accepted')
    return verdict.problems[0]
  }
  // A price cap the live lane (1/4) misses: the batch lane (0.5/2) meets the first, not the second.
  const laneOnly = problem({ max_price: { prompt: '0.5', completion: '2' } })
  expect(laneOnly.path).toBe('body.provider.max_price')
  expect(laneOnly.message).toBe(
    'leaves no offering of lane/cheap but a batch lane, which cannot serve a line alone: every live or flex one is dearer on prompt or completion',
  )
  expect(laneOnly.fix).toBe(
    'raise max_price to at least {"prompt": "1", "completion": "4"} (USD per million tokens), the prices of lane/cheap\'s cheapest live or flex offering (sim)',
  )
  const none = problem({ max_price: { prompt: '0.4', completion: '2' } })
  expect(none.message).toBe(
    'leaves no offering of lane/cheap: every one is dearer on prompt or completion',
  )
  // Names that leave no offering at all are not told of a batch lane.
  const unknown = problem({ only: ['sim:turbo'] })
  expect(unknown.path).toBe('body.provider')
  expect(unknown.message).toBe('leaves no configured provider for lane/cheap')
  expect(unknown.fix).toBe('allow one of: sim')
  const lane = problem({ only: ['sim:batch'] })
  expect(lane.message).toBe(
    'leaves no configured provider for lane/cheap but a batch lane, which cannot serve a line alone',
  )
})
