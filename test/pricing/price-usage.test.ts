import { describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import type { Offering } from '../../src/catalog/catalog-file.ts'
import { priceOf } from '../../src/pricing/ceiling.ts'
import { priceUsage } from '../../src/pricing/price-usage.ts'

const offering = (input: string, output: string): Offering =>
  ({
    provider: 'p',
    upstream_model: 'm',
    input_usd_per_mtok: input,
    output_usd_per_mtok: output,
  }) as Offering

describe('priceUsage', () => {
  test('prices usage at list price per million tokens, exactly', () => {
    expect(priceUsage({ input_tokens: 80, output_tokens: 60 }, offering('0.05', '0.40'))).toBe(
      '0.000028',
    )
    expect(priceUsage({ input_tokens: 1_000_000, output_tokens: 0 }, offering('2.50', '10'))).toBe(
      '2.5',
    )
    expect(priceUsage({ input_tokens: 3, output_tokens: 7 }, offering('15', '75'))).toBe('0.00057')
    expect(priceUsage({ input_tokens: 0, output_tokens: 0 }, offering('3', '15'))).toBe('0')
    expect(priceUsage({ input_tokens: 1, output_tokens: 0 }, offering('0.0000001', '0'))).toBe(
      '0.0000000000001',
    )
    expect(
      priceUsage(
        { input_tokens: 12_345_678, output_tokens: 9_876_543 },
        offering('1234.5', '0.001'),
      ),
    ).toBe('15240.749367543')
  })

  test('agrees with the decimal.js arithmetic for any usage and plain decimal prices', () => {
    const price = fc
      .tuple(fc.nat({ max: 99_999 }), fc.option(fc.stringMatching(/^\d{1,9}$/), { nil: undefined }))
      .map(([whole, fraction]) => (fraction === undefined ? String(whole) : `${whole}.${fraction}`))
    const tokens = fc.nat({ max: 2_000_000_000 })
    fc.assert(
      fc.property(tokens, tokens, price, price, (input, output, inputPrice, outputPrice) => {
        const exact = priceOf(
          { input, output },
          { input: inputPrice, output: outputPrice },
        ).toFixed()
        expect(
          priceUsage(
            { input_tokens: input, output_tokens: output },
            offering(inputPrice, outputPrice),
          ),
        ).toBe(exact)
      }),
      { numRuns: 2_000 },
    )
  })
})
