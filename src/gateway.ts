/**
 * The composition root: config → store, limiter, catalog, admission → HTTP (+ dispatcher).
 * `main.ts` runs it as a process; tests start it in-process on a random port.
 */
import { createAccounts } from './accounts/accounts.ts'
import { createFineTuneDirectory } from './accounts/fine-tune-directory.ts'
import { createFineTunes } from './accounts/fine-tunes.ts'
import { createAdmission } from './admission/submit-batch.ts'
import { createFileValidator } from './ingest/parallel-validation.ts'
import { createSchemaChecks } from './schemas/schema-checks.ts'
import { createAuthenticator } from './auth/authenticate.ts'
import { createKeyCache } from './auth/key-cache.ts'
import { createLiveCredit, type LiveCredit } from './live/live-credit.ts'
import { collectYoungGarbage } from './memory/young-garbage.ts'
import { createCatalog } from './catalog/catalog.ts'
import { createRedisFleetStreams } from './coordination/fleet-streams.ts'
import { connectRedis } from './coordination/redis.ts'
import { GATEWAY_BUN_ARGS, PARSER_HEAD_BYTES, parserHeadBytes } from './http/head-limit.ts'
import { createRedisFleetRates } from './coordination/fleet-rates.ts'
import { NUDGE_CHANNEL, openNudges, type Nudges } from './coordination/nudges.ts'
import {
  BATCH_CHANGES_CHANNEL,
  openBatchChanges,
  type BatchChanges,
} from './coordination/batch-changes.ts'
import { announceChanges } from './dispatch/announce-changes.ts'
import type { Config } from './config.ts'
import { adminRoutes } from './http/admin.ts'
import { bodyLimits } from './http/body-limits.ts'
import { createApp } from './http/app.ts'
import { dashboardRoutes } from './http/dashboard/dashboard-routes.ts'
import { healthRoutes, readinessChecks } from './http/health.ts'
import { liveRoutes, liveService } from './http/live.ts'
import { anthropicBatchRoutes } from './http/anthropic/message-batches-routes.ts'
import { anthropicMessagesRoutes } from './http/anthropic/messages-routes.ts'
import { unknownAnthropicRoute } from './http/anthropic/anthropic-errors.ts'
import { responsesRoutes } from './http/responses/responses-routes.ts'
import { Elysia } from 'elysia'
import { nativeBatchRoutes } from './http/native-batches.ts'
import { createStreamSlots } from './http/stream-slots.ts'
import { webhookRoutes } from './http/webhooks.ts'
import { createDispatcher, type Dispatcher } from './dispatch/dispatcher.ts'
import { createBatchLanes, tickMsFor, type BatchLanes } from './dispatch/batch-lane/batch-lanes.ts'
import { createBatchClients } from './upstream/batch-clients.ts'
import { withChunkShares } from './store/batch-chunks/shares-with-chunks.ts'
import { DEFAULT_RETRY } from './dispatch/retry-policy.ts'
import { createWaitingBatches } from './dispatch/waiting-batches.ts'
import { newId } from './domain.ts'
import { createFleetGates } from './upstream/fleet-gate.ts'
import { createUpstreams, type Upstreams } from './upstream/upstreams.ts'
import { createMemoryLimiter, type RateLimiter } from './limits/rate-limiter.ts'
import { createRedisLimiter } from './limits/redis-limiter.ts'
import { openBlobStore, openStore, openStoreChannel } from './store/open-store.ts'
import { createJanitor, type Janitor } from './retention/janitor.ts'
import { createWebhookDeliverer, type WebhookDeliverer } from './webhooks/deliver-webhooks.ts'
import { openAiBatchRoutes } from './http/openai/batches-routes.ts'
import { openAiFilesRoutes } from './http/openai/files-routes.ts'
import type { DispatchStore, Store } from './store/store.ts'
import { createLogger, type Logger } from './telemetry/logger.ts'
import { observeLines } from './telemetry/observe-lines.ts'
import { createTelemetry } from './telemetry/telemetry.ts'
import { createPrometheusMetrics, timeUpstreamCalls } from './telemetry/prometheus.ts'
import { createUsageRecorder } from './dispatch/usage-recorder.ts'
import { countLineOutcomes, countLiveCharges } from './dispatch/count-outcomes.ts'
import { metricsRoutes, usageRoutes } from './http/usage.ts'

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
  const logger = options.logger ?? createLogger(config.logLevel)
  // GET /metrics counts in memory what happens here, beside the OpenTelemetry export (docs/operations.md).
  const metrics = createPrometheusMetrics()
  const telemetry = timeUpstreamCalls(
    createTelemetry({ otlpEndpoint: config.otlpEndpoint, serviceName: 'multigrid', logger }),
    metrics,
  )
  // The dispatcher's part of the store apart: on a SQLite file or PostgreSQL it runs on a thread.
  const { store, dispatch, chunks } = await openStore(config, {
    collectGarbage: collectYoungGarbage,
  })
  const blobs = await openBlobStore(config)
  const usage = createUsageRecorder(store, { everyMs: 1_000, logger })
  const observed = observeLines(logger, telemetry)
  const counted = countLineOutcomes(usage, metrics)
  // One Redis connection, for the shared rate limits and the fleet-wide provider gates.
  const redis = config.redisUrl ? await connectRedis(config.redisUrl) : null
  const limiter: RateLimiter = redis
    ? createRedisLimiter(redis, { prefix: `${config.redisPrefix}rl:`, logger })
    : createMemoryLimiter()
  const catalog = createCatalog(config.catalog, config.providerKeys)
  const instanceId = newId('inst_')
  const keys = createKeyCache((hash) => store.findKey(hash), { ttlMs: config.live.keyCacheMs })
  const auth = createAuthenticator(store, limiter, telemetry, keys)
  const credit = createLiveCredit(store, {
    instanceId,
    chargeIntervalMs: config.live.chargeIntervalMs,
    leaseTtlMs: config.live.leaseTtlMs,
    idleMs: config.live.leaseIdleMs,
    blockCalls: config.live.leaseBlockCalls,
    logger,
    now: options.clock,
  })
  // With Redis, each provider's max_concurrency holds for the whole fleet, not per instance.
  const fleet = redis
    ? createFleetGates(redis, {
        instance: instanceId,
        ttlMs: config.dispatch.leaseSeconds * 1000,
        logger,
        prefix: `${config.redisPrefix}sem:`,
      })
    : null
  const upstreams = createUpstreams(config, telemetry, fleet?.gate)
  // Registered and deactivated through this instance: seen here at once, elsewhere within 5 s.
  const fineTuneDirectory = createFineTuneDirectory(store, { ttlMs: 5_000 })
  const fineTunes = createFineTunes(store, catalog, { onChanged: fineTuneDirectory.forget })
  // Every batch the dispatcher moves is announced to the progress streams of every instance.
  const batchChanges = await openBatchChanges(
    await openStoreChannel(config, BATCH_CHANGES_CHANNEL),
    instanceId,
    logger,
  )
  // Tenants' json_schemas are compiled and judged on threads of their own, each within a budget
  // (docs/structured-outputs.md): nothing on the event loop waits for one.
  const schemaChecks = createSchemaChecks({ budgetMs: config.schemaCheckMs })
  const announced = announceChanges(dispatch, batchChanges.publish)
  const retry = { ...DEFAULT_RETRY, maxAttempts: config.dispatch.maxAttempts }
  // The providers' batch APIs as lanes (docs/batch-lanes.md), beside the live dispatcher.
  const batchClients = config.dispatch.enabled ? createBatchClients(config) : new Map()
  const lanes: BatchLanes | null =
    batchClients.size > 0
      ? createBatchLanes(
          { store, dispatch: announced, chunks, catalog, clients: batchClients, retry, logger },
          {
            holder: instanceId,
            leaseMs: Math.min(config.dispatch.leaseSeconds * 1000, 30_000),
            tickMs: tickMsFor(catalog),
          },
        )
      : null
  const dispatcher: Dispatcher | null = config.dispatch.enabled
    ? createDispatcher(
        { store: announced, catalog, upstreams, logger },
        {
          owner: instanceId,
          leaseSeconds: config.dispatch.leaseSeconds,
          pollMs: config.dispatch.pollMs,
          retry,
          drainMs: 10_000,
          onOutcome: (outcome, line) => {
            observed(outcome)
            counted(outcome, line)
          },
          spillMargin: config.dispatch.spillMargin,
          fineTunes: fineTuneDirectory.byId,
          schemaChecks,
          fleetRates: redis
            ? createRedisFleetRates(redis, {
                instance: instanceId,
                prefix: `${config.redisPrefix}rates:`,
                logger,
              })
            : undefined,
          laneBatches: lanes?.laneBatches,
        },
      )
    : null
  // Batches waiting for a top-up start on any instance once a deposit covers them.
  let nudges: Nudges | null = null
  const waiting = createWaitingBatches(store, {
    everyMs: config.dispatch.creditWaitPollMs,
    logger,
    onStarted: (ids) => {
      nudges?.publish()
      // validating → in_progress: their streams report it at once.
      batchChanges.publish(ids)
    },
    onEnded: (ids) => batchChanges.publish(ids),
    now: options.clock,
  })
  // Admissions and deposits on any instance wake idle dispatchers and the batches waiting for
  // credit on every instance (NOTIFY on PostgreSQL).
  nudges = await openNudges(
    await openStoreChannel(config, NUDGE_CHANNEL),
    instanceId,
    logger,
    () => {
      dispatcher?.nudge()
      waiting.soon()
    },
  )
  telemetry.observe({
    pendingLines: () => queueDepth(),
    linesInFlight: () => dispatcher?.inFlight ?? 0,
  })
  const validator = createFileValidator(catalog, config, {
    collectGarbage: collectYoungGarbage,
    schemaChecks,
  })
  const admission = createAdmission(
    {
      store,
      validator,
      onAdmitted: (batch) => {
        logger.info('batch.admitted', {
          batch_id: batch.id,
          account_id: batch.accountId,
          lines: batch.counts.total,
          cost_ceiling_usd: batch.costCeilingUsd,
          source: batch.source,
        })
        nudges.publish()
      },
      telemetry,
      fineTunes: fineTuneDirectory.active,
    },
    { limits: config.limits, now: options.clock },
  )
  // A key revoked through this instance is refused here at once; elsewhere within the cache TTL.
  const accounts = createAccounts(
    store,
    {
      maxOpenBatches: config.limits.defaultMaxOpenBatches,
      rateLimitPerMinute: config.limits.defaultRateLimitPerMinute,
      maxFiles: config.limits.defaultMaxFiles,
      maxStoredBytes: config.limits.defaultMaxStoredBytes,
    },
    { onKeyRevoked: keys.forgetKey, onDeposit: () => nudges.publish(), now: options.clock },
  )

  const quotaDefaults = {
    maxFiles: config.limits.defaultMaxFiles,
    maxStoredBytes: config.limits.defaultMaxStoredBytes,
  }
  const bodies = bodyLimits(config.limits)
  // A cancel moves the batch's counts and status at once: its streams hear it with the dispatcher.
  const onCancelled = (id: string) => {
    dispatcher?.cancelled(id)
    batchChanges.publish([id])
    lanes
      ?.cancelled(id)
      .catch((error: Error) =>
        logger.warn('batch_lanes.cancel_failed', { batch_id: id, reason: error.message }),
      )
  }
  // With Redis the per-key stream limit holds for the fleet (docs/webhooks-and-streams.md), else per instance.
  const slots = createStreamSlots({
    maxPerKey: config.events.maxStreamsPerKey,
    fleet: redis
      ? createRedisFleetStreams(redis, { prefix: `${config.redisPrefix}streams:`, logger })
      : undefined,
  })
  const events = {
    changes: batchChanges,
    keepAliveMs: config.events.keepAliveMs,
    pollMs: config.events.pollMs,
    slots,
  }
  const live = {
    auth,
    credit,
    catalog,
    upstreams,
    logger,
    createdAt: Math.floor(Date.now() / 1000),
    bodyLimit: bodies.live,
    fineTunes: fineTuneDirectory.active,
    schemaChecks,
    charged: countLiveCharges(usage, metrics),
  }
  const queueDepth = async () =>
    (await dispatch.runnableBatches(Date.now(), 10_000)).reduce((sum, b) => sum + b.pending, 0)
  const liveCalls = liveService(live)
  // The batch routes show the lines inside the lanes' provider batches (docs/batch-lanes.md).
  const batchView = lanes ? withChunkShares(store, chunks) : store
  const groups = [
    healthRoutes(
      readinessChecks({
        store: () => store.ping(),
        redis: limiter.ping && (() => limiter.ping!()),
      }),
    ),
    nativeBatchRoutes({
      auth,
      store: batchView,
      admission,
      maxBodyBytes: config.limits.maxBodyBytes,
      bodyLimit: bodies.nativeSubmit,
      retryLimit: bodies.retry,
      fileBuffers: validator.bodyBuffers,
      onCancelled,
      events,
    }),
    usageRoutes({ auth, store, flush: () => usage.flush() }),
    metricsRoutes({
      metrics,
      queueDepth: () => queueDepth(),
      inFlight: () => dispatcher?.inFlight ?? 0,
      token: config.metricsToken,
    }),
    liveRoutes('', live),
    liveRoutes('/openai', live),
    // docs/clients/anthropic-sdk.md: the Responses API and the Anthropic API, on the same live path and admission.
    responsesRoutes('', liveCalls, catalog),
    responsesRoutes('/openai', liveCalls, catalog),
    anthropicMessagesRoutes(live, liveCalls),
    anthropicBatchRoutes({
      auth,
      store,
      admission,
      limits: config.limits,
      bodyLimit: bodies.nativeSubmit,
      onCancelled,
    }),
    new Elysia({ name: 'anthropic-unknown' }).all('/anthropic/*', ({ request }) =>
      unknownAnthropicRoute(request),
    ),
    openAiFilesRoutes({
      auth,
      store,
      blobs,
      maxFileBytes: config.limits.maxFileBytes,
      quotaDefaults,
      bodyLimit: bodies.fileUpload,
    }),
    openAiBatchRoutes({
      auth,
      store: batchView,
      blobs,
      admission,
      bodyLimit: bodies.batchCreate,
      onCancelled,
    }),
    webhookRoutes({
      auth,
      store,
      bodyLimit: bodies.webhookCreate,
      allowPrivate: config.webhooks.allowPrivate,
    }),
    dashboardRoutes({
      auth,
      store: batchView,
      admission,
      maxBodyBytes: config.limits.maxBodyBytes,
      bodyLimits: bodies,
      sessionHours: config.sessionHours,
      onCancelled,
      events,
      flushUsage: () => usage.flush(),
    }),
  ]
  if (config.adminToken)
    groups.push(adminRoutes(config.adminToken, accounts, bodies.admin, fineTunes) as never)
  const app = createApp(logger, groups as never, telemetry)
  app.listen({
    port: config.port,
    hostname: config.host,
    // Elysia asks for SO_REUSEPORT, and then a second gateway started on a taken port (a stale
    // one, or one with another data directory) silently gets half the connections: keys and
    // batches seem to come and go. A port in use is an error at start instead.
    reusePort: false,
    // No server-wide cap: over one, Bun answers 413 itself, with no body (not the §11 envelope),
    // and closes the connection at once, often before the client has read even that. Each route
    // has its own limit instead, enforced as it reads (http/body-limits.ts), and Bun discards
    // what a route does not read as it arrives, without holding it (docs/RELIABILITY.md).
    maxRequestBodySize: Number.MAX_SAFE_INTEGER,
  })
  const port = app.server!.port!
  if (parserHeadBytes() < PARSER_HEAD_BYTES)
    logger.warn('http.head_limit', {
      reason: `Bun's own limit on a request's head is ${parserHeadBytes()} bytes: heads over it get Bun's bare 431, not the error envelope. Start the gateway with \`npm start\` or \`bun ${GATEWAY_BUN_ARGS.join(' ')} src/main.ts\`.`,
    })
  dispatcher?.start()
  lanes?.start()
  waiting.start()
  const janitor = createJanitor(store, blobs, logger, config.retention)
  janitor.start(config.retention.intervalMs, { singleInstance: store.kind === 'sqlite' })
  // Every instance delivers; the store's leases give each attempt to one of them.
  const webhooks = createWebhookDeliverer(store, {
    owner: instanceId,
    timeoutMs: config.webhooks.timeoutMs,
    retryBaseMs: config.webhooks.retryBaseMs,
    disableAfterMs: config.webhooks.disableAfterMs,
    allowPrivate: config.webhooks.allowPrivate,
    pollMs: config.dispatch.pollMs,
    logger,
    onAttempt: (result) => metrics.webhookAttempt(result),
  })
  webhooks.start()
  usage.start()
  logger.info('gateway.started', {
    port,
    store: store.kind,
    rate_limiter: config.redisUrl ? 'redis' : 'memory',
  })
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    store,
    dispatch,
    logger,
    instanceId,
    dispatcher,
    janitor,
    webhooks,
    credit,
    batchChanges,
    upstreams,
    async stop() {
      await waiting.stop()
      await janitor.stop()
      // Attempts under way end, their deliveries handed back for another instance or the next start.
      await webhooks.stop()
      // Progress streams end first: app.stop waits for open responses.
      slots.close()
      // Stop taking requests, let in-flight lines finish (bounded), hand the rest back.
      await app.stop(true)
      // Charges of answered live calls written, leases handed back.
      await credit.stop()
      await validator.close()
      // Before the dispatcher: a tick under way ends while the store is open.
      await lanes?.stop()
      await dispatcher?.stop()
      await schemaChecks.close()
      // After the dispatcher: the lines it finished while draining are counted too.
      await usage.stop()
      await nudges.close()
      await batchChanges.close()
      await fleet?.close()
      // Before the store closes: the last metric export still reads the queue depth from it.
      await telemetry.shutdown()
      await upstreams.close()
      await blobs.close()
      await limiter.close()
      redis?.disconnect()
      await store.close()
    },
  }
}
