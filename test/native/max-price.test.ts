/**
 * The per-line price cap of docs/money-and-limits.md (`provider.max_price`), over real HTTP with simulators as
 * upstreams: one model with a dear offering (listed first) and a cheap one, each on its own
 * simulator, so where a line or live call went is what each simulator received. Batch lines go
 * cheapest first (docs/routing.md), so the batch tests prefer the dear one with `provider.order`: the
 * cap is then what moves them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chatLine, jsonl, STORES } from '../helpers/gateway.ts'
import { twoOfferings } from '../helpers/two-offerings.ts'

const MODEL = 'sim/priced'

/** A dear offering (listed first) and a cheap one, each on its own simulator. */
const OFFERINGS: [Record<string, unknown>, Record<string, unknown>] = [
  {
    provider: 'dear',
    upstream_model: 'sim-dear',
    input_usd_per_mtok: '3.00',
    output_usd_per_mtok: '15.00',
  },
  {
    provider: 'cheap',
    upstream_model: 'sim-cheap',
    input_usd_per_mtok: '0.25',
    // Written with a trailing zero, as catalogs often are ("0.40"): the fix says it so.
    output_usd_per_mtok: '1.250',
  },
]

interface Issue {
  line: number
  path: string
  message: string
  fix: string
}

const lines = (count: number, provider?: Record<string, unknown>) =>
  Array.from({ length: count }, (_, i) =>
    chatLine(`l${i}`, `question ${i}`, provider ? { provider } : {}, MODEL),
  )

for (const storeKind of STORES) {
  describe(`per-line price cap (${storeKind})`, () => {
    const gateway = twoOfferings(storeKind, MODEL, OFFERINGS)
    beforeAll(() => gateway.start())
    afterAll(() => gateway.stop())
    const { submit, ceiling, run } = gateway
    const rejected = async (file: string) => {
      const response = await submit(file)
      expect(response.status).toBe(400)
      const json = (await response.json()) as { error: { code: string }; issues: Issue[] }
      expect(json.error.code).toBe('invalid_batch_file')
      return json.issues
    }

    const dearFirst = ['dear', 'cheap']

    test('a cap that excludes the dear offering routes every line to the cheap one', async () => {
      const rows = await run(
        jsonl(lines(6, { order: dearFirst, max_price: { prompt: '1.00', completion: '4.00' } })),
      )
      expect(rows).toHaveLength(6)
      for (const row of rows) expect([row.status, row.provider]).toEqual(['succeeded', 'cheap'])
      // Uncapped, the same lines go to the offering they prefer: the cap is what moved them.
      const uncapped = await run(jsonl(lines(2, { order: dearFirst })))
      for (const row of uncapped) expect(row.provider).toBe('dear')
    })

    test('the dry-run ceiling counts only the offerings left', async () => {
      const capped = await ceiling(jsonl(lines(3, { max_price: { prompt: 1, completion: 4 } })))
      const cheapOnly = await ceiling(jsonl(lines(3, { only: ['cheap'] })))
      const uncapped = await ceiling(jsonl(lines(3)))
      expect(capped.equals(cheapOnly)).toBe(true)
      expect(capped.lessThan(uncapped)).toBe(true)
    })

    test('either key alone is a cap', async () => {
      for (const max_price of [{ prompt: '2.999' }, { completion: 14.99 }, { prompt: 0.25 }]) {
        const rows = await run(jsonl(lines(2, { order: dearFirst, max_price })))
        for (const row of rows) expect(row.provider).toBe('cheap')
      }
      // A cap equal to the dear offering's prices keeps it (dearer, not as dear, is excluded).
      const rows = await run(
        jsonl(lines(2, { order: dearFirst, max_price: { prompt: '3', completion: '15.000' } })),
      )
      for (const row of rows) expect(row.provider).toBe('dear')
    })

    test('a cap no offering meets is an issue whose fix names the cheapest prices', async () => {
      const file = jsonl([
        chatLine('fine', 'hello', {}, MODEL),
        ...lines(1, { max_price: { prompt: '0.10', completion: '100' } }),
      ])
      const issues = await rejected(file)
      expect(issues).toHaveLength(1)
      expect(issues[0]).toMatchObject({ line: 2, path: 'body.provider.max_price' })
      expect(issues[0]!.fix).toContain('"prompt": "0.25"')
      // The prices as the catalog and GET /v1/models write them.
      expect(issues[0]!.fix).toContain('"completion": "1.250"')
      expect(issues[0]!.fix).toContain('cheap')
      // The dry run refuses it the same way.
      expect((await submit(file, '?dry_run=true')).status).toBe(400)
    })

    test('a negative, non-numeric or unknown cap is a precise issue', async () => {
      const cases: [Record<string, unknown>, string, string][] = [
        [{ prompt: '-1' }, 'body.provider.max_price.prompt', 'decimal string'],
        [{ completion: -0.5 }, 'body.provider.max_price.completion', 'at least 0'],
        [{ prompt: 'cheap' }, 'body.provider.max_price.prompt', 'decimal string'],
        [{ completion: true }, 'body.provider.max_price.completion', 'a string or a number'],
        [{ input: '1' }, 'body.provider.max_price', 'unknown field input'],
      ]
      for (const [max_price, path, words] of cases) {
        const issues = await rejected(jsonl(lines(1, { max_price })))
        expect(issues).toHaveLength(1)
        expect(issues[0]!.path).toBe(path)
        expect(issues[0]!.message).toContain(words)
        expect(issues[0]!.fix.length).toBeGreaterThan(5)
      }
    })

    test('a live call with a cap uses the cheap offering', async () => {
      const { first: dear, second: cheap } = gateway.sims()
      const call = (provider?: Record<string, unknown>) =>
        gateway.call({
          model: MODEL,
          messages: [{ role: 'user', content: 'hello' }],
          max_tokens: 8,
          ...(provider ? { provider } : {}),
        })
      const before = { dear: dear.received().length, cheap: cheap.received().length }
      const capped = await call({ max_price: { completion: '4' } })
      expect(capped.status).toBe(200)
      expect(cheap.received().length).toBe(before.cheap + 1)
      expect(dear.received().length).toBe(before.dear)
      const refused = await call({ max_price: { prompt: '0.01' } })
      expect(refused.status).toBe(400)
      const error = ((await refused.json()) as { error: { param: string; message: string } }).error
      expect(error.param).toBe('provider.max_price')
      expect(dear.received().length + cheap.received().length).toBe(before.dear + before.cheap + 1)
    })
  })
}
