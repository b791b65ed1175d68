/**
 * The rate limiter contract on Redis, when TEST_REDIS_URL names one (skipped otherwise), and what
 * only the Redis limiter promises: instances of one fleet count together, fleets with different
 * prefixes count apart, and the counters live under the prefix with an expiry. This file's keys
 * live under a prefix of its own, deleted at the end.
 */
import { afterAll, afterEach, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import Redis from 'ioredis'
import { WINDOW_MS } from '../../src/limits/rate-limiter.ts'
import { connectRedis } from '../../src/coordination/redis.ts'
import { createRedisLimiter } from '../../src/limits/redis-limiter.ts'
import { createLogger } from '../../src/telemetry/logger.ts'
import { waitFor } from '../helpers/wait.ts'
import { runLimiterContract } from './contract.ts'

const url = process.env.TEST_REDIS_URL

if (!url) {
  describe('rate limiter contract: redis', () => {
    test.skip('needs TEST_REDIS_URL, e.g. redis://127.0.0.1:6379', () => {})
  })
} else {
  const base = `mgt:limits-${randomBytes(4).toString('hex')}:`
  const warnings: string[] = []
  const logger = createLogger('warn', (line) => warnings.push(line))
  const redis = new Redis(url, { maxRetriesPerRequest: 1 })
  redis.on('error', () => {})

  /** A Redis limiter, once it is connected (before that, every hit would go to the fallback). */
  const connected = async (prefix: string, now: () => number = Date.now) => {
    const connection = await connectRedis(url)
    const limiter = createRedisLimiter(connection, { prefix, logger, now })
    await waitFor(
      'the limiter to reach Redis',
      () =>
        limiter.ping!().then(
          () => true,
          () => false,
        ),
      5_000,
      20,
    )
    // The limiter does not own its connection (the gateway shares one): closing it closes both here.
    return {
      ...limiter,
      close: async () => {
        await limiter.close()
        connection.disconnect()
      },
    }
  }

  // A limiter that fell back to counting in process would pass the contract unseen: it logs.
  afterEach(() => {
    expect(warnings).toEqual([])
  })

  afterAll(async () => {
    const keys = await redis.keys(`${base}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
  })

  runLimiterContract('redis', (now) => connected(`${base}rl:`, now))

  describe('redis limiter: fleets and prefixes', () => {
    test('two instances with the same prefix count one key together', async () => {
      const [a, b] = await Promise.all([connected(`${base}one:rl:`), connected(`${base}one:rl:`)])
      try {
        const key = `key_${randomBytes(6).toString('hex')}`
        expect((await a.hit(key, 3)).remaining).toBe(2)
        expect((await b.hit(key, 3)).remaining).toBe(1)
        expect((await a.hit(key, 3)).remaining).toBe(0)
        expect((await b.hit(key, 3)).allowed).toBe(false)
      } finally {
        await Promise.all([a.close(), b.close()])
      }
    })

    test('two fleets with different prefixes count the same key id apart', async () => {
      const [a, b] = await Promise.all([connected(`${base}a:rl:`), connected(`${base}b:rl:`)])
      try {
        const key = `key_${randomBytes(6).toString('hex')}`
        for (let i = 0; i < 3; i++) expect((await a.hit(key, 3)).allowed).toBe(true)
        expect((await a.hit(key, 3)).allowed).toBe(false)
        expect(await b.hit(key, 3)).toMatchObject({ allowed: true, remaining: 2 })
      } finally {
        await Promise.all([a.close(), b.close()])
      }
    })

    test("a key's counter lives under the prefix, as <prefix><key id>:<window>, and expires", async () => {
      const now = Date.now()
      const limiter = await connected(`${base}ttl:rl:`, () => now)
      try {
        const key = `key_${randomBytes(6).toString('hex')}`
        await limiter.hit(key, 10)
        await limiter.hit(key, 10)
        const counter = `${base}ttl:rl:${key}:${Math.floor(now / WINDOW_MS)}`
        expect(await redis.get(counter)).toBe('2')
        const ttl = await redis.pttl(counter)
        expect(ttl).toBeGreaterThan(WINDOW_MS)
        expect(ttl).toBeLessThanOrEqual(2 * WINDOW_MS)
        // Nothing under the prefix the limiter used before it had one.
        expect(await redis.keys(`mg:rl:${key}:*`)).toEqual([])
      } finally {
        await limiter.close()
      }
    })
  })
}
