/** A wait with an end (a 429 pause, a lane's refusal) lasts until it (and a moment after); other reasons stand as stored. */
import { expect, test } from 'bun:test'
import { currentWaiting, type BatchWaiting } from '../../src/domain.ts'

test('a 429 pause stops being a wait a moment after its resume time; other reasons stand', () => {
  const paused: BatchWaiting = { code: 'provider_rate_limited', message: 'm', until: 1_000 }
  expect(currentWaiting(paused, 999)).toBe(paused)
  expect(currentWaiting(paused, 1_002)).toBe(paused)
  expect(currentWaiting(paused, 1_003)).toBeNull()
  const cap: BatchWaiting = { code: 'max_cost_reached', message: 'm' }
  expect(currentWaiting(cap, 10_000)).toBe(cap)
  const credit: BatchWaiting = { code: 'insufficient_credit', message: 'm', until: 1_000 }
  expect(currentWaiting(credit, 10_000)).toBe(credit)
  expect(currentWaiting(null, 0)).toBeNull()
})

test("a batch lane's refusal lapses at its until on any instance; a provider down has none and stands", () => {
  const refused: BatchWaiting = { code: 'provider_unavailable', message: 'm', until: 1_000 }
  expect(currentWaiting(refused, 1_002)).toBe(refused)
  expect(currentWaiting(refused, 1_003)).toBeNull()
  const down: BatchWaiting = { code: 'provider_unavailable', message: 'm' }
  expect(currentWaiting(down, 10_000)).toBe(down)
})
