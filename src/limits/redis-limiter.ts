/**
 * The fleet-wide limiter: one counter per key and window in Redis, incremented and given its
 * expiry by one Lua script, so there is no read-then-write race between instances. When Redis
 * cannot be reached the request is still served, counted by the in-process limiter instead; the
 * outage is logged once, not per request.
 */
import type Redis from 'ioredis'
import type { Logger } from '../telemetry/logger.ts'
import { createMemoryLimiter, decide, WINDOW_MS, type RateLimiter } from './rate-limiter.ts'

const SCRIPT = `
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return count`

export interface RedisLimiterOptions {
  /** Prepended to every counter's key (`<prefix><key id>:<window>`), so fleets sharing one Redis count apart. */
  prefix: string
  logger: Logger
  /** The clock that picks the window; Redis expires the counters on its own. */
  now?: () => number
}

/** `redis`: the instance's connection (src/coordination/redis.ts); the caller closes it. */
export function createRedisLimiter(redis: Redis, options: RedisLimiterOptions): RateLimiter {
  const { prefix, logger, now: clock = Date.now } = options
  const fallback = createMemoryLimiter()
  let degraded = false
  const onError = (error: Error) => {
    if (!degraded) {
      degraded = true
      logger.warn('rate_limiter.redis_unreachable', {
        reason: error.message,
        fallback: 'per-instance',
      })
    }
  }
  const onReady = () => {
    if (degraded) logger.info('rate_limiter.redis_recovered')
    degraded = false
  }
  redis.on('error', onError)
  redis.on('ready', onReady)
  return {
    async hit(keyId, limit) {
      const now = clock()
      const window = Math.floor(now / WINDOW_MS)
      try {
        const count = (await redis.eval(
          SCRIPT,
          1,
          `${prefix}${keyId}:${window}`,
          WINDOW_MS * 2,
        )) as number
        return decide(count, limit, (window + 1) * WINDOW_MS - now)
      } catch (error) {
        onError(error as Error)
        return fallback.hit(keyId, limit)
      }
    },
    async ping() {
      // While it reconnects, say so at once rather than let the probe wait for a command.
      if (redis.status !== 'ready') throw new Error(`redis is ${redis.status}`)
      await redis.ping()
    },
    async close() {
      redis.off('error', onError)
      redis.off('ready', onReady)
    },
  }
}
