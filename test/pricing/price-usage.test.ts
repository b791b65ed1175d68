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

describe('priceUsage by token class (docs/pricing.md)', () => {
  const sonnet = {
    ...offering('3', '15'),
    cached_input_usd_per_mtok: '0.30',
    cache_write_usd_per_mtok: '3.75',
    cache_write_1h_usd_per_mtok: '6',
    long_context: {
      above_input_tokens: 200_000,
      input_usd_per_mtok: '6',
      output_usd_per_mtok: '22.50',
      cached_input_usd_per_mtok: '0.60',
      cache_write_usd_per_mtok: '7.50',
      cache_write_1h_usd_per_mtok: '12',
    },
  } as Offering

  test('each class at its rate: uncached, read, 5-minute and 1-hour writes, output', () => {
    // 1,000 uncached × 3 + 2,000 read × 0.30 + 3,000 5m × 3.75 + 4,000 1h × 6 + 500 out × 15
    // = 3,000 + 600 + 11,250 + 24,000 + 7,500 = 46,350 per million = 0.04635
    const usage = {
      input_tokens: 10_000,
      output_tokens: 500,
      cached_input_tokens: 2_000,
      cache_write_tokens: 3_000,
      cache_write_1h_tokens: 4_000,
    }
    expect(priceUsage(usage, sonnet)).toBe('0.04635')
  })

  test('above the threshold, all classes together, the whole request is at the long-context rates', () => {
    const at = (input: number) =>
      priceUsage(
        { input_tokens: input, output_tokens: 1_000, cached_input_tokens: 100_000 },
        sonnet,
      )
    // 200,000 prompt tokens is not above: 100,000 × 3 + 100,000 × 0.30 + 1,000 × 15
    expect(at(200_000)).toBe('0.345')
    // 200,001: 100,001 × 6 + 100,000 × 0.60 + 1,000 × 22.50
    expect(at(200_001)).toBe('0.682506')
  })

  test('an absent class rate is the input rate, at the base tier and in the long-context tier', () => {
    const plain = {
      ...offering('2', '8'),
      long_context: { above_input_tokens: 10, input_usd_per_mtok: '4', output_usd_per_mtok: '16' },
    } as Offering
    const usage = {
      input_tokens: 10,
      output_tokens: 0,
      cached_input_tokens: 5,
      cache_write_tokens: 5,
    }
    expect(priceUsage(usage, plain)).toBe('0.00002')
    expect(priceUsage({ ...usage, input_tokens: 11 }, plain)).toBe('0.000044')
  })
})
