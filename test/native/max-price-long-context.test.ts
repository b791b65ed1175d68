/**
 * The per-line price cap against long-context tiers (docs/money-and-limits.md, docs/pricing.md),
 * over real HTTP with simulators as upstreams: an offering within the cap at its base prices is
 * dearer than the cap for a line whose prompt bound can pass its long-context threshold (that
 * line would be billed wholly at the tier's rates), so it is not used for that line; a short
 * line still goes there. A second offering, within the cap at every length, is where the long
 * lines go; kept to the tiered one alone, a long line is refused with the tier's prices.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chatLine, jsonl, STORES } from '../helpers/gateway.ts'
import { twoOfferings } from '../helpers/two-offerings.ts'

const MODEL = 'sim/tiered'
/** The tier's threshold: a one-word prompt's bound is well under it, LONG's well over. */
const ABOVE = 300
const LONG = 'a long question about the weather '.repeat(20)
/** Within the tiered offering's base prices (2 and 12), below its tier's (2.5 and 15). */
const CAP = { prompt: '2', completion: '12' }

/** The tiered offering (listed first) and the flat one, each on its own simulator. */
const OFFERINGS: [Record<string, unknown>, Record<string, unknown>] = [
  {
    provider: 'tiered',
    upstream_model: 'sim-tiered',
    input_usd_per_mtok: '2',
    output_usd_per_mtok: '12',
    long_context: {
      above_input_tokens: ABOVE,
      input_usd_per_mtok: '2.5',
      output_usd_per_mtok: '15',
    },
  },
  {
    provider: 'flat',
    upstream_model: 'sim-flat',
    input_usd_per_mtok: '1.75',
    output_usd_per_mtok: '11',
  },
]

interface Issue {
  line: number
  path: string
  message: string
  fix: string
}

const lines = (count: number, content: string, provider: Record<string, unknown>) =>
  Array.from({ length: count }, (_, i) =>
    chatLine(`l${i}`, `${content} ${i}`, { provider, max_tokens: 40 }, MODEL),
  )

for (const storeKind of STORES) {
  describe(`price cap and long-context tiers (${storeKind})`, () => {
    const gateway = twoOfferings(storeKind, MODEL, OFFERINGS)
    beforeAll(() => gateway.start())
    afterAll(() => gateway.stop())
    const { submit, run } = gateway
    const call = (content: string, provider: Record<string, unknown>) =>
      gateway.call({
        model: MODEL,
        messages: [{ role: 'user', content }],
        max_tokens: 40,
        provider,
      })
    const received = () => {
      const { first: tiered, second: flat } = gateway.sims()
      return { tiered: tiered.received().length, flat: flat.received().length }
    }

    test('batch lines whose prompt can reach the tier go to the offering within the cap; short ones stay', async () => {
      const routing = { order: ['tiered', 'flat'], max_price: CAP }
      const long = await run(jsonl(lines(4, LONG, routing)))
      expect(long).toHaveLength(4)
      for (const row of long) expect([row.status, row.provider]).toEqual(['succeeded', 'flat'])
      const short = await run(jsonl(lines(4, 'hi', routing)))
      for (const row of short) expect([row.status, row.provider]).toEqual(['succeeded', 'tiered'])
    })

    test('a batch line kept to the tiered offering is an issue whose fix names the tier’s prices', async () => {
      const routing = { only: ['tiered'], max_price: CAP }
      const response = await submit(jsonl(lines(1, LONG, routing)))
      expect(response.status).toBe(400)
      const { issues } = (await response.json()) as { issues: Issue[] }
      expect(issues).toHaveLength(1)
      expect(issues[0]).toMatchObject({ line: 1, path: 'body.provider.max_price' })
      expect(issues[0]!.fix).toContain('{"prompt": "2.5", "completion": "15"}')
      expect(issues[0]!.fix).toContain('long-context')
      // A short line under the same cap is served there.
      const short = await run(jsonl(lines(2, 'hi', routing)))
      for (const row of short) expect([row.status, row.provider]).toEqual(['succeeded', 'tiered'])
    })

    test('a live call whose prompt can reach the tier goes to the offering within the cap; a short one stays', async () => {
      const before = received()
      const long = await call(LONG, { max_price: CAP })
      expect(long.status).toBe(200)
      expect(received()).toEqual({ tiered: before.tiered, flat: before.flat + 1 })
      const short = await call('hi', { max_price: CAP })
      expect(short.status).toBe(200)
      expect(received()).toEqual({ tiered: before.tiered + 1, flat: before.flat + 1 })
    })

    test('a live call kept to the tiered offering is a 400 naming the tier’s prices', async () => {
      const before = received()
      const refused = await call(LONG, { only: ['tiered'], max_price: CAP })
      expect(refused.status).toBe(400)
      const { error } = (await refused.json()) as { error: { param: string; message: string } }
      expect(error.param).toBe('provider.max_price')
      expect(error.message).toContain('{"prompt": "2.5", "completion": "15"}')
      expect(received()).toEqual(before)
      const short = await call('hi', { only: ['tiered'], max_price: CAP })
      expect(short.status).toBe(200)
      expect(received()).toEqual({ tiered: before.tiered + 1, flat: before.flat })
    })
  })
}
