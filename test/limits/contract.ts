/**
 * The one contract every RateLimiter runs (as test/store/<role>.test.ts is for each store role):
 * test/limits/memory-limiter.test.ts and test/limits/redis-limiter.test.ts call it with their
 * factory. Each test gets a limiter of its own on a clock it moves, and key ids of its own, so
 * runs sharing one Redis do not count each other's hits.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { WINDOW_MS, type RateLimiter } from '../../src/limits/rate-limiter.ts'

/** Makes a limiter whose windows follow `now`. */
export type MakeLimiter = (now: () => number) => Promise<RateLimiter>

// The start of a one-minute window (an exact multiple of WINDOW_MS), in milliseconds.
const WINDOW_START = Math.floor(1_764_460_000_000 / WINDOW_MS) * WINDOW_MS

export function runLimiterContract(name: string, make: MakeLimiter) {
  describe(`rate limiter contract: ${name}`, () => {
    let clock = WINDOW_START
    let limiter: RateLimiter | null = null
    const start = async (at = WINDOW_START) => {
      clock = at
      limiter = await make(() => clock)
      return limiter
    }
    const newKey = () => `key_${randomBytes(6).toString('hex')}`

    afterEach(async () => {
      await limiter?.close()
      limiter = null
    })

    test('the first hit of a key in a window is allowed, with the limit and what is left of it', async () => {
      const rate = await start(WINDOW_START + 15_000)
      expect(await rate.hit(newKey(), 10)).toEqual({
        allowed: true,
        limit: 10,
        remaining: 9,
        resetSeconds: 45,
      })
    })

    test('exactly `limit` hits pass in a window; every later one is refused with nothing left', async () => {
      const rate = await start()
      const key = newKey()
      const remaining: number[] = []
      for (let i = 0; i < 5; i++) {
        const decision = await rate.hit(key, 5)
        expect(decision.allowed).toBe(true)
        remaining.push(decision.remaining)
      }
      expect(remaining).toEqual([4, 3, 2, 1, 0])
      for (let i = 0; i < 3; i++) {
        expect(await rate.hit(key, 5)).toMatchObject({ allowed: false, limit: 5, remaining: 0 })
      }
    })

    test('hits made at the same moment are each counted once: exactly the limit pass', async () => {
      const rate = await start()
      const key = newKey()
      const decisions = await Promise.all(Array.from({ length: 40 }, () => rate.hit(key, 25)))
      expect(decisions.filter((decision) => decision.allowed)).toHaveLength(25)
      const left = decisions
        .filter((decision) => decision.allowed)
        .map((decision) => decision.remaining)
      expect(left.sort((a, b) => a - b)).toEqual(Array.from({ length: 25 }, (_, i) => i))
    })

    test('keys are counted apart', async () => {
      const rate = await start()
      const [busy, quiet] = [newKey(), newKey()]
      for (let i = 0; i < 3; i++) await rate.hit(busy, 3)
      expect((await rate.hit(busy, 3)).allowed).toBe(false)
      expect(await rate.hit(quiet, 3)).toMatchObject({ allowed: true, remaining: 2 })
    })

    test('the next window starts afresh', async () => {
      const rate = await start(WINDOW_START + 59_000)
      const key = newKey()
      for (let i = 0; i < 2; i++) await rate.hit(key, 2)
      expect((await rate.hit(key, 2)).allowed).toBe(false)
      clock = WINDOW_START + WINDOW_MS
      expect(await rate.hit(key, 2)).toEqual({
        allowed: true,
        limit: 2,
        remaining: 1,
        resetSeconds: 60,
      })
    })

    test('resetSeconds is the window left, rounded up, and never 0', async () => {
      const rate = await start(WINDOW_START + 30_500)
      const key = newKey()
      expect((await rate.hit(key, 100)).resetSeconds).toBe(30)
      clock = WINDOW_START + WINDOW_MS - 1
      expect((await rate.hit(key, 100)).resetSeconds).toBe(1)
    })

    test('the limit is the one given with each hit, over the hits counted so far', async () => {
      // A key's limit changed by an admin applies at once, to the window already begun.
      const rate = await start()
      const key = newKey()
      for (let i = 0; i < 3; i++) await rate.hit(key, 3)
      expect((await rate.hit(key, 3)).allowed).toBe(false)
      expect(await rate.hit(key, 10)).toMatchObject({ allowed: true, limit: 10, remaining: 5 })
      expect(await rate.hit(key, 2)).toMatchObject({ allowed: false, limit: 2, remaining: 0 })
    })

    test('ping, when there is a shared backend, answers; close resolves', async () => {
      const rate = await start()
      if (rate.ping) await rate.ping()
      await rate.close()
      limiter = null
    })
  })
}
