/**
 * Two fleets sharing one Redis, told apart by MULTIGRID_REDIS_PREFIX: one fleet's requests do not
 * count against the other's rate limits, even for the same key id (a staging copy of production's
 * data, say). Two gateways over real HTTP, each on its own copy of one SQLite data directory, so
 * both know the same key.
 */
import { describe, expect, test } from 'bun:test'
import { cpSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import Redis from 'ioredis'
import { startTestGateway, TEST_REDIS_URL, type TestGateway } from '../helpers/gateway.ts'

/** Fixed one-minute windows: a burst that straddles a boundary is counted in two. */
async function awayFromWindowEdge(needMs: number) {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < needMs) await Bun.sleep(left + 50)
}

if (!TEST_REDIS_URL) {
  describe('scale: fleets sharing one Redis', () => {
    test.skip('needs TEST_REDIS_URL, e.g. redis://127.0.0.1:6379', () => {})
  })
} else {
  const url = TEST_REDIS_URL
  describe('scale: fleets sharing one Redis', () => {
    test("one fleet's requests do not count against the other's rate limit for the same key", async () => {
      const base = `mgt:fleets-${randomBytes(4).toString('hex')}:`
      const production = mkdtempSync(join(tmpdir(), 'mg-fleet-a-'))
      const staging = mkdtempSync(join(tmpdir(), 'mg-fleet-b-'))
      const start = (dir: string, prefix: string) =>
        startTestGateway({
          env: { REDIS_URL: url, MULTIGRID_REDIS_PREFIX: prefix, MULTIGRID_DATA_DIR: dir },
        })
      const redis = new Redis(url, { maxRetriesPerRequest: 1 })
      redis.on('error', () => {})
      const gateways: TestGateway[] = []
      try {
        // The key is made once, then the data directory copied: both fleets know the same key id.
        const first = await start(production, `${base}prod:`)
        const { key, keyId } = await first.newAccount('1', { rate_limit_per_minute: 5 })
        await first.stop()
        cpSync(production, staging, { recursive: true })
        gateways.push(
          await start(production, `${base}prod:`),
          await start(staging, `${base}staging:`),
        )
        const [a, b] = gateways
        // Until each limiter has reached Redis, hits are counted in process instead.
        for (const gateway of gateways) {
          for (let i = 0; i < 100 && (await gateway.request('/readyz', null)).status !== 200; i++)
            await Bun.sleep(20)
        }

        await awayFromWindowEdge(5_000)
        const get = async (gateway: TestGateway) => {
          const answer = await gateway.request('/v1/batches', key)
          await answer.arrayBuffer()
          return { status: answer.status, remaining: answer.headers.get('x-ratelimit-remaining') }
        }
        const onA = []
        for (let i = 0; i < 5; i++) onA.push(await get(a))
        expect(onA).toEqual(
          ['4', '3', '2', '1', '0'].map((remaining) => ({ status: 200, remaining })),
        )
        expect(await get(a)).toEqual({ status: 429, remaining: '0' })
        // The other fleet's window for this key is untouched: its own five, counted from five.
        expect(await get(b)).toEqual({ status: 200, remaining: '4' })
        expect(await get(a)).toEqual({ status: 429, remaining: '0' })

        // Each fleet's counter lives under its own prefix.
        const window = Math.floor(Date.now() / 60_000)
        expect(await redis.get(`${base}prod:rl:${keyId}:${window}`)).toBe('7')
        expect(await redis.get(`${base}staging:rl:${keyId}:${window}`)).toBe('1')
      } finally {
        await Promise.all(gateways.map((gateway) => gateway.stop()))
        const keys = await redis.keys(`${base}*`)
        if (keys.length > 0) await redis.del(...keys)
        redis.disconnect()
      }
    }, 30_000)
  })
}
