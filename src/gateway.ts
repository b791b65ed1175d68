/**
 * The composition root: config → store, limiter, catalog, admission → HTTP (+ dispatcher).
 * `main.ts` runs it as a process; tests start it in-process on a random port. Each step is a
 * module of src/gateway/; this file keeps their order, which is the start order.
 */
import { createFineTuneDirectory } from './accounts/fine-tune-directory.ts'
import { createFineTunes } from './accounts/fine-tunes.ts'
import { createCatalog } from './catalog/catalog.ts'
import {
  BATCH_CHANGES_CHANNEL,
  openBatchChanges,
  type BatchChanges,
} from './coordination/batch-changes.ts'
import type { Config } from './config.ts'
import type { Dispatcher } from './dispatch/dispatcher.ts'
import { createUsageRecorder } from './dispatch/usage-recorder.ts'
import { newId } from './domain.ts'
import { buildApp } from './gateway/build-app.ts'
import { buildDispatch } from './gateway/build-dispatch.ts'
import { buildAccess, buildUpstreams } from './gateway/build-callers.ts'
import type { GatewayCore } from './gateway/gateway-core.ts'
import { openRedis, openStores } from './gateway/open-stores.ts'
import { startLoops } from './gateway/start-loops.ts'
import { stopGateway } from './gateway/stop-gateway.ts'
import type { LiveCredit } from './live/live-credit.ts'
import type { Janitor } from './retention/janitor.ts'
import { createSchemaChecks } from './schemas/schema-checks.ts'
import { openStoreChannel } from './store/open-store.ts'
import { KEY_REVOCATIONS_CHANNEL, openKeyRevocations } from './coordination/key-revocations.ts'
import type { DispatchStore, Store } from './store/store.ts'
import { createLogger, type Logger } from './telemetry/logger.ts'
import { warnCredentialsRefused } from './telemetry/credentials-refused.ts'
import { createPrometheusMetrics, timeUpstreamCalls } from './telemetry/prometheus.ts'
import { createTelemetry } from './telemetry/telemetry.ts'
import type { Upstreams } from './upstream/upstreams.ts'
import type { WebhookDeliverer } from './webhooks/deliver-webhooks.ts'

export interface Gateway {
  url: string
  port: number
  store: Store
  /** The store's part the dispatcher calls (claims, outcomes, maintenance). */
  dispatch: DispatchStore
  logger: Logger
  instanceId: string
  dispatcher: Dispatcher | null
  janitor: Janitor
  /** Sends the outbox's webhook deliveries; on every instance, like the janitor. */
  webhooks: WebhookDeliverer
  /** The live path's credit ledger; tests flush it to see charges at once. */
  credit: LiveCredit
  /** Batch change signals between instances, which the progress streams watch. */
  batchChanges: BatchChanges
  /** The providers as called: their gates, replicas' health and working points. */
  upstreams: Upstreams
  stop(): Promise<void>
}

export async function startGateway(
  config: Config,
  /**
   * `clock` (Unix ms): what admission and the live ledger take for now, so a test can cross
   * 00:00 UTC (the daily spend limit's reset); everything else keeps the real time.
   */
  options: { logger?: Logger; clock?: () => number } = {},
): Promise<Gateway> {
  const core = await openCore(config, options)
  const { logger, store, instanceId } = core
  const { keys, auth, credit } = buildAccess(core)
  // A key revoked on any instance, or by the CLI, is forgotten by every instance's cache at once.
  const revocations = await openKeyRevocations(
    await openStoreChannel(config, KEY_REVOCATIONS_CHANNEL),
    logger,
    keys.forgetKey,
  )
  const { fleet, upstreams } = buildUpstreams(core)
  // Registered and deactivated through this instance: seen here at once, elsewhere within 5 s.
  const fineTuneDirectory = createFineTuneDirectory(store, { ttlMs: 5_000 })
  const fineTunes = createFineTunes(store, core.catalog, { onChanged: fineTuneDirectory.forget })
  // Every batch the dispatcher moves is announced to the progress streams of every instance.
  const batchChanges = await openBatchChanges(
    await openStoreChannel(config, BATCH_CHANGES_CHANNEL),
    instanceId,
    logger,
  )
  // Tenants' json_schemas are compiled and judged on threads of their own, each within a budget
  // (docs/structured-outputs.md): nothing on the event loop waits for one.
  const schemaChecks = createSchemaChecks({ budgetMs: config.schemaCheckMs })
  const dispatching = await buildDispatch(core, {
    upstreams,
    fineTuneDirectory,
    batchChanges,
    schemaChecks,
  })
  const http = buildApp(core, {
    keys,
    revocations,
    auth,
    credit,
    upstreams,
    fineTuneDirectory,
    fineTunes,
    batchChanges,
    schemaChecks,
    dispatching,
  })
  const { janitor, webhooks } = startLoops(core, dispatching)
  logger.info('gateway.started', {
    host: config.host,
    port: http.port,
    store: store.kind,
    rate_limiter: config.redisUrl ? 'redis' : 'memory',
  })
  const running = {
    core,
    dispatching,
    http,
    janitor,
    webhooks,
    credit,
    schemaChecks,
    batchChanges,
    revocations,
    fleet,
    upstreams,
  }
  return {
    url: `http://127.0.0.1:${http.port}`,
    port: http.port,
    store,
    dispatch: core.dispatch,
    logger,
    instanceId,
    dispatcher: dispatching.dispatcher,
    janitor,
    webhooks,
    credit,
    batchChanges,
    upstreams,
    stop: () => stopGateway(running),
  }
}

/** The logger, the metrics and telemetry, the stores, Redis and the catalog, in that order. */
async function openCore(
  config: Config,
  options: { logger?: Logger; clock?: () => number },
): Promise<GatewayCore> {
  const logger = options.logger ?? createLogger(config.logLevel)
  // GET /metrics counts in memory what happens here, beside the OpenTelemetry export (docs/operations.md).
  const metrics = createPrometheusMetrics()
  const telemetry = timeUpstreamCalls(
    createTelemetry({ otlp: config.otlp, serviceName: 'multigrid', logger }),
    metrics,
    warnCredentialsRefused(logger),
  )
  const { store, dispatch, chunks, blobs, dataDirLock } = await openStores(config)
  const usage = createUsageRecorder(store, { everyMs: 1_000, logger })
  const { redis, limiter } = await openRedis(config, logger)
  const catalog = createCatalog(config.catalog, config.providerKeys)
  const instanceId = newId('inst_')
  return {
    config,
    logger,
    clock: options.clock,
    instanceId,
    metrics,
    telemetry,
    store,
    dispatch,
    chunks,
    blobs,
    dataDirLock,
    usage,
    redis,
    limiter,
    catalog,
  }
}
