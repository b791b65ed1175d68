/** The live path's integer money (fixed-point.ts) against the decimal.js arithmetic it stands for. */
import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { Offering } from '../../src/catalog/catalog-file.ts'
import { highestPrices, priceOf } from '../../src/pricing/ceiling.ts'
import { Money } from '../../src/money/decimal.ts'
import { toUnits, unitsText } from '../../src/money/fixed-point.ts'
import { ceilingRates, ceilingUnits } from '../../src/pricing/ceiling-rates.ts'
import { priceUsage, priceUsageUnits } from '../../src/pricing/price-usage.ts'

const offering = (input: string, output: string): Offering =>
  ({
    provider: 'p',
    upstream_model: 'm',
    input_usd_per_mtok: input,
    output_usd_per_mtok: output,
  }) as Offering

// Catalog prices: up to 9 decimals per million tokens, as the catalog allows in practice.
const price = fc
  .tuple(fc.nat({ max: 99_999 }), fc.option(fc.stringMatching(/^\d{1,9}$/), { nil: undefined }))
  .map(([whole, fraction]) => (fraction === undefined ? String(whole) : `${whole}.${fraction}`))
const tokens = fc.nat({ max: 2_000_000_000 })

describe('fixed-point money', () => {
  test('round-trips decimal text, rounding past 18 places the way asked', () => {
    expect(unitsText(toUnits('0.000120', 'up'))).toBe('0.00012')
    expect(unitsText(toUnits('12', 'down'))).toBe('12')
    expect(unitsText(toUnits('0', 'up'))).toBe('0')
    expect(unitsText(toUnits('0.0000000000000000011', 'up'))).toBe('0.000000000000000002')
    expect(unitsText(toUnits('0.0000000000000000019', 'down'))).toBe('0.000000000000000001')
  })

  test('a live ceiling is priceOf(tokens, highestPrices(offerings)) exactly', () => {
    fc.assert(
      fc.property(
        tokens,
        tokens,
        fc.array(fc.tuple(price, price), { minLength: 1, maxLength: 3 }),
        (input, output, prices) => {
          const offerings = prices.map(([i, o]) => offering(i, o))
          const exact = priceOf({ input, output }, highestPrices(offerings))
          expect(
            new Money(unitsText(ceilingUnits({ input, output }, ceilingRates(offerings)))).equals(
              exact,
            ),
          ).toBe(true)
        },
      ),
      { numRuns: 1_000 },
    )
  })

  test('a live cost (priceUsage as units) is priceUsage exactly: 18 places hold catalog prices', () => {
    fc.assert(
      fc.property(tokens, tokens, price, price, (input, output, inputPrice, outputPrice) => {
        const usage = { input_tokens: input, output_tokens: output }
        const cost = priceUsage(usage, offering(inputPrice, outputPrice))
        expect(unitsText(priceUsageUnits(usage, offering(inputPrice, outputPrice)))).toBe(cost)
      }),
      { numRuns: 1_000 },
    )
  })
})
