/** The base model's limits on one batch's fine-tunes (src/catalog/fine-tunes.ts), rule by rule. */
import { describe, expect, test } from 'bun:test'
import { fineTuneLimitProblem } from '../../src/catalog/fine-tunes.ts'
import { modelSchema } from '../../src/catalog/catalog-file.ts'

const base = modelSchema.parse({
  id: 'vendor/base-7b',
  endpoints: ['chat'],
  context_tokens: 8192,
  max_output_tokens: 1024,
  adapters: { max_per_batch: 8, limits_by_rank: { '64': 4, '32': 8 }, max_total_mib: 1008 },
  offerings: [{ provider: 'pool', upstream_model: 'base', input_usd_per_mtok: '0.1' }],
})
const of = (rank: number, count: number, sizeMib = 100) =>
  Array.from({ length: count }, () => ({ rank, sizeMib }))
const limitOf = (fineTunes: { rank: number; sizeMib: number }[]) =>
  fineTuneLimitProblem(base, fineTunes)?.limit ?? null

describe('fine-tune limits of a base model', () => {
  test('up to each limit passes: 8 of rank 32 or lower, 4 of rank 64, 1,008 MiB', () => {
    expect(limitOf(of(32, 8))).toBeNull()
    expect(limitOf(of(8, 8))).toBeNull()
    expect(limitOf(of(64, 4))).toBeNull()
    expect(limitOf([...of(64, 4), ...of(16, 4)])).toBeNull()
    expect(limitOf(of(16, 6, 168))).toBeNull()
  })

  test('past one, the issue names it', () => {
    expect(limitOf(of(16, 9))).toBe('max_per_batch')
    expect(limitOf(of(64, 5))).toBe('limits_by_rank')
    expect(limitOf([...of(33, 3), ...of(64, 2)])).toBe('limits_by_rank')
    expect(limitOf(of(16, 7, 160))).toBe('max_total_mib')
    expect(fineTuneLimitProblem(base, of(64, 5))!.message).toContain('at most 4 of rank 64')
  })

  test('a base without an "adapters" entry sets no limit here (registration refuses its fine-tunes)', () => {
    const plain = modelSchema.parse({ ...base, adapters: undefined })
    expect(fineTuneLimitProblem(plain, of(64, 20))).toBeNull()
  })
})
