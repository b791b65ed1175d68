/**
 * The HTTP side: file validation, admission and accounts, the live path's dependencies, the
 * progress streams' slots, and the app listening on its port.
 */
import { createAccounts, type Accounts } from '../accounts/accounts.ts'
import type { FineTuneDirectory } from '../accounts/fine-tune-directory.ts'
import type { FineTunes } from '../accounts/fine-tunes.ts'
import { createAdmission, type Admission } from '../admission/submit-batch.ts'
import type { Authenticator } from '../auth/authenticate.ts'
import type { KeyCache } from '../auth/key-cache.ts'
import type { BatchChanges } from '../coordination/batch-changes.ts'
import type { KeyRevocations } from '../coordination/key-revocations.ts'
import { createRedisFleetStreams } from '../coordination/fleet-streams.ts'
import { countLiveCharges } from '../dispatch/count-outcomes.ts'
import { createApp } from '../http/app.ts'
import { bodyLimits } from '../http/body-limits.ts'
import { GATEWAY_BUN_ARGS, PARSER_HEAD_BYTES, parserHeadBytes } from '../http/head-limit.ts'
import type { LiveDeps } from '../http/live.ts'
import { createStreamSlots, type StreamSlots } from '../http/stream-slots.ts'
import { createFileValidator, type FileValidator } from '../ingest/parallel-validation.ts'
import type { LiveCredit } from '../live/live-credit.ts'
import { collectYoungGarbage } from '../memory/young-garbage.ts'
import type { SchemaChecks } from '../schemas/schema-checks.ts'
import { withChunkShares } from '../store/batch-chunks/shares-with-chunks.ts'
import type { Upstreams } from '../upstream/upstreams.ts'
import type { Dispatching } from './build-dispatch.ts'
import type { GatewayCore } from './gateway-core.ts'
import { routeGroups } from './route-groups.ts'

/** What the HTTP side is built from, beyond the core. */
export interface AppParts {
  keys: KeyCache
  revocations: KeyRevocations
  auth: Authenticator
  credit: LiveCredit
  upstreams: Upstreams
  fineTuneDirectory: FineTuneDirectory
  fineTunes: FineTunes
  batchChanges: BatchChanges
  schemaChecks: SchemaChecks
  dispatching: Dispatching
}

export interface ListeningApp {
  app: ReturnType<typeof createApp>
  port: number
  slots: StreamSlots
  validator: FileValidator
}

/** Builds the services and the routes, and listens on the configured port. */
export function buildApp(core: GatewayCore, parts: AppParts): ListeningApp {
  const { config, logger } = core
  const { auth, dispatching } = parts
  const validator = createFileValidator(core.catalog, config, {
    collectGarbage: collectYoungGarbage,
    schemaChecks: parts.schemaChecks,
  })
  const { admission, accounts } = buildAdmission(core, parts, validator)
  const bodies = bodyLimits(config.limits)
  // With Redis the per-key stream limit holds for the fleet (docs/webhooks-and-streams.md), else per instance.
  const slots = createStreamSlots({
    maxPerKey: config.events.maxStreamsPerKey,
    fleet: core.redis
      ? createRedisFleetStreams(core.redis, { prefix: `${config.redisPrefix}streams:`, logger })
      : undefined,
  })
  const events = {
    changes: parts.batchChanges,
    keepAliveMs: config.events.keepAliveMs,
    pollMs: config.events.pollMs,
    slots,
  }
  const live: LiveDeps = {
    auth,
    credit: parts.credit,
    catalog: core.catalog,
    upstreams: parts.upstreams,
    logger,
    createdAt: Math.floor(Date.now() / 1000),
    bodyLimit: bodies.live,
    fineTunes: parts.fineTuneDirectory.active,
    schemaChecks: parts.schemaChecks,
    charged: countLiveCharges(core.usage, core.metrics),
  }
  const groups = routeGroups(core, {
    auth,
    admission,
    validator,
    accounts,
    fineTunes: parts.fineTunes,
    live,
    // The batch routes show the lines inside the lanes' provider batches (docs/batch-lanes.md).
    batchView: dispatching.lanes ? withChunkShares(core.store, core.chunks) : core.store,
    events,
    bodies,
    onCancelled: (id, lines) => cancelled(core, parts, id, lines),
    queueDepth: dispatching.queueDepth,
    dispatcher: dispatching.dispatcher,
  })
  const app = createApp(logger, groups, core.telemetry)
  const port = listen(core, app)
  return { app, port, slots, validator }
}

/** Admission, and the accounts whose deposits wake the batches waiting for credit. */
function buildAdmission(
  core: GatewayCore,
  parts: AppParts,
  validator: FileValidator,
): { admission: Admission; accounts: Accounts } {
  const { config, logger, store, clock } = core
  const { nudges } = parts.dispatching
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
      telemetry: core.telemetry,
      fineTunes: parts.fineTuneDirectory.active,
      logger,
      releaseLiveLease: (accountId) => parts.credit.handBack(accountId),
    },
    { limits: config.limits, now: clock },
  )
  // A key revoked through this instance is refused at once here and, told on the store's
  // channel, everywhere else (coordination/key-revocations.ts).
  const accounts = createAccounts(
    store,
    {
      maxOpenBatches: config.limits.defaultMaxOpenBatches,
      rateLimitPerMinute: config.limits.defaultRateLimitPerMinute,
      maxFiles: config.limits.defaultMaxFiles,
      maxStoredBytes: config.limits.defaultMaxStoredBytes,
    },
    { onKeyRevoked: parts.revocations.publish, onDeposit: () => nudges.publish(), now: clock },
  )
  return { admission, accounts }
}

/** A cancel moves the batch's counts and status at once: its streams hear it with the dispatcher. */
function cancelled(core: GatewayCore, parts: AppParts, id: string, lines: number): void {
  core.metrics.linesEnded('cancelled', lines)
  parts.dispatching.dispatcher?.cancelled(id)
  parts.batchChanges.publish([id])
  parts.dispatching.lanes
    ?.cancelled(id)
    .catch((error: Error) =>
      core.logger.warn('batch_lanes.cancel_failed', { batch_id: id, reason: error.message }),
    )
}

function listen(core: GatewayCore, app: ReturnType<typeof createApp>): number {
  const { config, logger } = core
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
  return port
}
