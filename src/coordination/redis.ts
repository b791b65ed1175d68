/**
 * The instance's one Redis connection (REDIS_URL), shared by the per-key rate limiter
 * (src/limits/redis-limiter.ts) and the fleet-wide provider gates (src/upstream/fleet-gate.ts).
 * Each of them listens to it for its own fallback and logs; neither closes it: the gateway does,
 * last.
 */
import Redis from 'ioredis'

/** Connects, waiting up to 2 s for Redis so that start-up does not log a false outage. */
export async function connectRedis(url: string): Promise<Redis> {
  // Fail fast while Redis is away (one retry, no offline queue): every user has a fallback, and
  // nothing should wait on a connection that is not there.
  const redis = new Redis(url, {
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: 2000,
  })
  // ioredis emits an error on every failed reconnect; without a listener it prints each one.
  // The users log an outage once each, through listeners of their own.
  redis.on('error', () => {})
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 2000)
    redis.once('ready', () => {
      clearTimeout(timer)
      resolve()
    })
  })
  return redis
}
