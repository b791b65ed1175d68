/**
 * The shipped catalog's prices are the providers' published ones (docs/pricing.md): every model says
 * when and where they were read, every chat model carries its provider's cache rates, and the
 * catalog's rules for rates and lanes (docs/pricing.md) refuse what the gateway cannot honour.
 */
import { describe, expect, test } from 'bun:test'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { catalogSchema, checkCatalog } from '../../src/catalog/catalog-file.ts'

const shipped = catalogSchema.parse(
  JSON.parse(readFileSync(join(import.meta.dir, '../../providers/catalog.default.json'), 'utf8')),
)

const PRICING_PAGES: Record<string, string> = {
  openai: 'https://openai.com/api/pricing/',
  anthropic: 'https://docs.claude.com/en/docs/about-claude/pricing',
}

describe('the shipped catalog', () => {
  test('every model has prices_as_of and price_source, its provider pricing page', () => {
    const lacking = shipped.models
      .filter((model) => !model.prices_as_of || !model.price_source)
      .map((model) => model.id)
    expect(lacking).toEqual([])
    for (const model of shipped.models) {
      expect(model.prices_as_of).toMatch(/^\d{4}-\d{2}-\d{2}$/)
      expect(model.price_source).toBe(PRICING_PAGES[model.offerings[0].provider])
    }
  })

  test('every chat model carries its provider published cache rates', () => {
    for (const model of shipped.models.filter((m) => m.endpoints.includes('chat'))) {
      for (const offering of model.offerings) {
        expect(offering.cached_input_usd_per_mtok).toBeDefined()
        if (shipped.providers[offering.provider].kind === 'anthropic') {
          // 5-minute writes 1.25×, 1-hour writes 2×, reads 0.1× of input.
          const input = Number(offering.input_usd_per_mtok)
          expect(Number(offering.cache_write_usd_per_mtok)).toBeCloseTo(input * 1.25, 10)
          expect(Number(offering.cache_write_1h_usd_per_mtok)).toBeCloseTo(input * 2, 10)
          expect(Number(offering.cached_input_usd_per_mtok)).toBeCloseTo(input * 0.1, 10)
        }
      }
    }
    const sonnet = shipped.models.find((m) => m.id === 'anthropic/claude-sonnet-4-5')!
    expect(sonnet.offerings[0].long_context).toEqual({
      above_input_tokens: 200_000,
      input_usd_per_mtok: '6.00',
      output_usd_per_mtok: '22.50',
      cached_input_usd_per_mtok: '0.60',
      cache_write_usd_per_mtok: '7.50',
      cache_write_1h_usd_per_mtok: '12.00',
    })
  })
})

describe('the offline catalog (providers/catalog.simulator.json)', () => {
  test("charges each model the shipped catalog's live rates, cache rates included", () => {
    const offline = catalogSchema.parse(
      JSON.parse(
        readFileSync(join(import.meta.dir, '../../providers/catalog.simulator.json'), 'utf8'),
      ),
    )
    const RATES = [
      'input_usd_per_mtok',
      'cached_input_usd_per_mtok',
      'cache_write_usd_per_mtok',
      'cache_write_1h_usd_per_mtok',
      'output_usd_per_mtok',
    ] as const
    const rates = (offering: Record<string, unknown>) =>
      RATES.map((rate) => (offering[rate] === undefined ? null : Number(offering[rate])))
    for (const model of offline.models) {
      const live = shipped.models
        .find((m) => m.id === model.id)
        ?.offerings.find((o) => o.lane === undefined)
      expect([model.id, live === undefined]).toEqual([model.id, false])
      for (const offering of model.offerings)
        expect([model.id, ...rates(offering)]).toEqual([model.id, ...rates(live!)])
    }
  })
})

describe('catalog rules for rates and lanes', () => {
  const file = (offerings: unknown[]) =>
    catalogSchema.parse({
      providers: {
        openai: { kind: 'openai', base_url: 'http://127.0.0.1:9/v1' },
        anthropic: { kind: 'anthropic', base_url: 'http://127.0.0.1:9' },
      },
      models: [
        { id: 'm', endpoints: ['chat'], context_tokens: 1000, max_output_tokens: 100, offerings },
      ],
    })
  const offering = (extra: Record<string, unknown> = {}) => ({
    provider: 'openai',
    upstream_model: 'u',
    input_usd_per_mtok: '1',
    output_usd_per_mtok: '2',
    ...extra,
  })

  test('one provider and upstream model once per lane: live and flex side by side is fine', () => {
    expect(
      checkCatalog(file([offering(), offering({ lane: 'flex', input_usd_per_mtok: '0.5' })])),
    ).toEqual([])
    expect(checkCatalog(file([offering(), offering()]))[0]).toContain('list it once per lane')
  })

  test('a batch lane needs a live offering beside it; flex only for kind openai', () => {
    expect(checkCatalog(file([offering(), offering({ lane: 'batch' })]))).toEqual([])
    expect(checkCatalog(file([offering({ lane: 'batch' })]))[0]).toContain(
      'needs a "live" or "flex"',
    )
    expect(checkCatalog(file([offering({ provider: 'anthropic', lane: 'flex' })]))[0]).toContain(
      'only a provider of kind "openai"',
    )
  })

  test("a base_url refused is shown without what comes before its '@' (a user and password)", () => {
    const withSecret = (base_url: string) =>
      checkCatalog({
        ...file([offering()]),
        providers: {
          ...file([offering()]).providers,
          openai: { ...file([offering()]).providers.openai!, base_url },
        },
      })
    for (const url of ['user:s3cret@host:8000/v1', 'ftp://user:s3cret@host/v1']) {
      const [problem] = withSecret(url)
      expect(problem).toContain('is not an http:// or https:// URL')
      expect(problem).not.toContain('s3cret')
    }
  })

  test('a rate must be a decimal string, a tier names its threshold', () => {
    expect(() => file([offering({ cached_input_usd_per_mtok: 0.1 })])).toThrow()
    expect(() =>
      file([offering({ long_context: { input_usd_per_mtok: '2', output_usd_per_mtok: '4' } })]),
    ).toThrow()
  })
})
