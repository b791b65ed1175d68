/**
 * Progress streams counted for the whole fleet (docs/webhooks-and-streams.md), in Redis: one sorted set per key,
 * `<prefix><key id>`, whose members are the key's open streams and whose scores are when each
 * stops counting unless renewed. An instance renews its own streams every third of `ttlMs`, so a
 * stream of an instance that died stops counting within `ttlMs`; one that ends is removed at
 * once. Taking a place is one Lua script (drop the stale, count, add), so racing instances never
 * pass the limit together. While Redis cannot be reached the caller counts per instance only.
 */
import type Redis from 'ioredis'
import type { Logger } from '../telemetry/logger.ts'

const TAKE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local used = redis.call('ZCARD', KEYS[1])
if used >= tonumber(ARGV[3]) then return used end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return -1`

export interface FleetStreams {
  /** A place for stream `streamId` of `keyId`: null when taken, else how many are open already. */
  take(keyId: string, streamId: string, max: number): Promise<number | null>
  /** The stream ended: its place is free at once. */
  drop(keyId: string, streamId: string): void
  close(): void
}

export function createRedisFleetStreams(
  redis: Redis,
  options: { prefix: string; logger: Logger; ttlMs?: number },
): FleetStreams {
  const ttlMs = options.ttlMs ?? 15_000
  /** This instance's streams in the fleet count: stream id → key id. */
  const mine = new Map<string, string>()
  let degraded = false
  const failed = (error: unknown) => {
    if (degraded) return
    degraded = true
    options.logger.warn('streams.redis_unreachable', {
      reason: (error as Error).message,
      fallback: 'per-instance',
    })
  }
  const renew = setInterval(() => {
    if (mine.size === 0) return
    const expiry = Date.now() + ttlMs
    const pipeline = redis.pipeline()
    for (const [streamId, keyId] of mine) {
      pipeline.zadd(`${options.prefix}${keyId}`, 'XX', expiry, streamId)
      pipeline.pexpire(`${options.prefix}${keyId}`, ttlMs)
    }
    pipeline.exec().catch(failed)
  }, ttlMs / 3)
  renew.unref?.()

  return {
    async take(keyId, streamId, max) {
      try {
        const now = Date.now()
        const answer = (await redis.eval(
          TAKE,
          1,
          `${options.prefix}${keyId}`,
          now,
          now + ttlMs,
          max,
          streamId,
          ttlMs,
        )) as number
        degraded = false
        if (answer >= 0) return answer
        mine.set(streamId, keyId)
        return null
      } catch (error) {
        // Counted on this instance only, meanwhile: a stream is not refused for Redis's outage.
        failed(error)
        return null
      }
    },
    drop(keyId, streamId) {
      if (!mine.delete(streamId)) return
      redis.zrem(`${options.prefix}${keyId}`, streamId).catch(failed)
    },
    close() {
      clearInterval(renew)
    },
  }
}
