/**
 * The key cache's store lookups are bounded (src/auth/key-cache.ts): every request of a key shares
 * one lookup, so one that never ends (a connection dropped without a word) must not hold the key
 * on this instance for good. Past the wait the requests are refused as the store's timeout, and
 * the next request asks the store again.
 */
import { expect, test } from 'bun:test'
import { createKeyCache } from '../../src/auth/key-cache.ts'

test('a lookup that never ends is let go: its requests are refused as a store timeout, the next asks again', async () => {
  const found = { key: { id: 'key_1' }, account: { id: 'acct_1' } } as never
  let calls = 0
  // The first lookup hangs for good; the next answers.
  const lookup = () => (++calls === 1 ? new Promise<never>(() => {}) : Promise.resolve(found))
  const cache = createKeyCache(lookup, { ttlMs: 1_000, lookupWaitMs: 50 })
  const started = performance.now()
  const waiting = [cache.find('h'), cache.find('h')].map((p) => p.catch((error: unknown) => error))
  const refusals = (await Promise.all(waiting)) as { code?: string; message: string }[]
  expect(performance.now() - started).toBeLessThan(1_000)
  for (const refusal of refusals) {
    expect(refusal.code).toBe('ETIMEDOUT')
    expect(refusal.message).toContain('did not answer a key lookup within 50 ms')
  }
  // Both waited on the one lookup; the next request asks the store again and is served.
  expect(calls).toBe(1)
  expect(await cache.find('h')).toBe(found)
  expect(calls).toBe(2)
})
