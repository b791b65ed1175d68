/** The composition root's first steps: the stores, and the Redis connection with the rate limiter. */
import type Redis from 'ioredis'
import type { Config } from '../config.ts'
import { connectRedis } from '../coordination/redis.ts'
import { createMemoryLimiter, type RateLimiter } from '../limits/rate-limiter.ts'
import { createRedisLimiter } from '../limits/redis-limiter.ts'
import { collectYoungGarbage } from '../memory/young-garbage.ts'
import type { BlobStore } from '../store/files/blob-store.ts'
import { openBlobStore, openStore } from '../store/open-store.ts'
import { lockDataDir, type DataDirLock } from '../store/data-dir-lock.ts'
import type { OpenedStore } from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'

/**
 * The store (its dispatcher's part apart: on a SQLite file or PostgreSQL it runs on a thread) and
 * the file content. On the embedded store the data dir's lock is taken first: one gateway a data
 * dir, so the line leases found there are a crashed run's, handed back as the store opens (a
 * restart resumes at once, not a lease later). On PostgreSQL another instance's may be live.
 */
export async function openStores(
  config: Config,
): Promise<OpenedStore & { blobs: BlobStore; dataDirLock: DataDirLock | null }> {
  const dataDirLock = config.databaseUrl ? null : lockDataDir(config.dataDir)
  try {
    const { store, dispatch, chunks } = await openStore(config, {
      collectGarbage: collectYoungGarbage,
      dataDirLocked: dataDirLock !== null,
    })
    const blobs = await openBlobStore(config)
    return { store, dispatch, chunks, blobs, dataDirLock }
  } catch (error) {
    dataDirLock?.release()
    throw error
  }
}

/** One Redis connection, for the shared rate limits and the fleet-wide provider gates. */
export async function openRedis(
  config: Config,
  logger: Logger,
): Promise<{ redis: Redis | null; limiter: RateLimiter }> {
  const redis = config.redisUrl ? await connectRedis(config.redisUrl) : null
  const limiter: RateLimiter = redis
    ? createRedisLimiter(redis, { prefix: `${config.redisPrefix}rl:`, logger })
    : createMemoryLimiter()
  return { redis, limiter }
}
