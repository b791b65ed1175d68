/**
 * What every step of the gateway's start builds on: the settings, the reporters, the stores and
 * the connection to Redis. Each step (open-stores.ts, build-dispatch.ts, build-app.ts, …) is a
 * function over it and the parts the steps before it made.
 */
import type Redis from 'ioredis'
import type { Catalog } from '../catalog/catalog.ts'
import type { Config } from '../config.ts'
import type { UsageRecorder } from '../dispatch/usage-recorder.ts'
import type { RateLimiter } from '../limits/rate-limiter.ts'
import type { ChunkStore } from '../store/batch-chunks/chunk-store.ts'
import type { BlobStore } from '../store/files/blob-store.ts'
import type { DataDirLock } from '../store/data-dir-lock.ts'
import type { DispatchStore, Store } from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'
import type { PrometheusMetrics } from '../telemetry/prometheus.ts'
import type { Telemetry } from '../telemetry/telemetry.ts'

export interface GatewayCore {
  config: Config
  logger: Logger
  /** What admission and the live ledger take for now; undefined: the real time. */
  clock: (() => number) | undefined
  instanceId: string
  /** GET /metrics's counts, beside the OpenTelemetry export. */
  metrics: PrometheusMetrics
  telemetry: Telemetry
  store: Store
  /** The store's part the dispatcher calls; on a SQLite file or PostgreSQL it runs on a thread. */
  dispatch: DispatchStore
  chunks: ChunkStore
  blobs: BlobStore
  /** The embedded store's data dir, held by this gateway until it stops; null on PostgreSQL. */
  dataDirLock: DataDirLock | null
  usage: UsageRecorder
  /** The instance's one Redis connection, when REDIS_URL is set. */
  redis: Redis | null
  limiter: RateLimiter
  catalog: Catalog
}
