/**
 * The dispatching side: the batch lanes (the providers' batch APIs), the live dispatcher, the
 * batches waiting for credit and the nudges that wake them. Built, not started: start-loops.ts
 * starts them once the HTTP server listens.
 */
import type { FineTuneDirectory } from '../accounts/fine-tune-directory.ts'
import type { BatchChanges } from '../coordination/batch-changes.ts'
import { createRedisFleetRates } from '../coordination/fleet-rates.ts'
import { NUDGE_CHANNEL, openNudges, type Nudges } from '../coordination/nudges.ts'
import { announceChanges } from '../dispatch/announce-changes.ts'
import { createBatchLanes, tickMsFor, type BatchLanes } from '../dispatch/batch-lane/batch-lanes.ts'
import { countedClaim, countLineOutcomes } from '../dispatch/count-outcomes.ts'
import { createDispatcher, type Dispatcher } from '../dispatch/dispatcher.ts'
import { DEFAULT_RETRY, type RetryPolicy } from '../dispatch/retry-policy.ts'
import { createWaitingBatches, type WaitingBatches } from '../dispatch/waiting-batches.ts'
import { createWaitingReporter, type WaitingReporter } from '../dispatch/waiting-reporter.ts'
import type { SchemaChecks } from '../schemas/schema-checks.ts'
import { openStoreChannel } from '../store/open-store.ts'
import { observeLines } from '../telemetry/observe-lines.ts'
import { createBatchClients } from '../upstream/batch-clients.ts'
import type { Upstreams } from '../upstream/upstreams.ts'
import type { GatewayCore } from './gateway-core.ts'

/** What the dispatching side is built from, beyond the core. */
export interface DispatchParts {
  upstreams: Upstreams
  fineTuneDirectory: FineTuneDirectory
  batchChanges: BatchChanges
  schemaChecks: SchemaChecks
}

export interface Dispatching {
  lanes: BatchLanes | null
  dispatcher: Dispatcher | null
  waiting: WaitingBatches
  nudges: Nudges
  /** Lines waiting to be dispatched (DispatchStore.queuedLines). */
  queueDepth: () => Promise<number>
}

export async function buildDispatch(core: GatewayCore, parts: DispatchParts): Promise<Dispatching> {
  const { config } = core
  // Every batch the dispatcher moves is announced to the progress streams of every instance.
  const announced = announceChanges(core.dispatch, parts.batchChanges.publish)
  const retry = { ...DEFAULT_RETRY, maxAttempts: config.dispatch.maxAttempts }
  // One account of why batches wait: a lane's reason is cleared by a line that ends live.
  const waitingReasons = createWaitingReporter(announced, core.logger)
  const lanes = buildLanes(core, parts, { announced, retry, waiting: waitingReasons })
  const dispatcher = config.dispatch.enabled
    ? buildDispatcher(core, parts, { announced, retry, lanes, waiting: waitingReasons })
    : null
  const { waiting, nudges } = await openWaiting(core, parts.batchChanges, dispatcher)
  const queueDepth = () => core.dispatch.queuedLines(Date.now())
  core.telemetry.observe({
    pendingLines: () => queueDepth(),
    linesInFlight: () => dispatcher?.inFlight ?? 0,
  })
  return { lanes, dispatcher, waiting, nudges, queueDepth }
}

/** What the lanes and the dispatcher share. */
interface Built {
  announced: GatewayCore['dispatch']
  retry: RetryPolicy
  lanes: BatchLanes | null
  waiting: WaitingReporter
}

/** The providers' batch APIs as lanes (docs/batch-lanes.md), beside the live dispatcher. */
function buildLanes(
  core: GatewayCore,
  { schemaChecks }: Pick<DispatchParts, 'schemaChecks'>,
  { announced, retry, waiting }: Omit<Built, 'lanes'>,
): BatchLanes | null {
  const { config, catalog } = core
  const clients = config.dispatch.enabled ? createBatchClients(config, core.telemetry) : new Map()
  if (clients.size === 0) return null
  const { store, chunks, logger } = core
  const onOutcome = countLineOutcomes(core.usage, core.metrics)
  return createBatchLanes(
    {
      store,
      dispatch: announced,
      chunks,
      catalog,
      clients,
      retry,
      logger,
      onOutcome,
      waiting,
      schemaChecks,
    },
    {
      holder: core.instanceId,
      leaseMs: Math.min(config.dispatch.leaseSeconds * 1000, 30_000),
      tickMs: tickMsFor(catalog),
    },
  )
}

function buildDispatcher(core: GatewayCore, parts: DispatchParts, built: Built): Dispatcher {
  const { config, catalog, logger, redis, instanceId } = core
  const observed = observeLines(logger)
  const counted = countLineOutcomes(core.usage, core.metrics)
  return createDispatcher(
    { store: built.announced, catalog, upstreams: parts.upstreams, logger },
    {
      owner: instanceId,
      leaseSeconds: config.dispatch.leaseSeconds,
      pollMs: config.dispatch.pollMs,
      retry: built.retry,
      drainMs: config.dispatch.drainMs,
      onOutcome: observed,
      onCharged: (outcome, line, chargedUsd) => {
        if (outcome.kind !== 'retry') core.telemetry.lineFinished(outcome.kind)
        counted(outcome, countedClaim(line, catalog), chargedUsd)
      },
      onLinesEnded: (ended) => {
        core.metrics.linesEnded('cancelled', ended.cancelled)
        core.metrics.linesEnded('expired', ended.expired)
      },
      spillMargin: config.dispatch.spillMargin,
      waiting: built.waiting,
      fineTunes: parts.fineTuneDirectory.byId,
      schemaChecks: parts.schemaChecks,
      fleetRates: redis
        ? createRedisFleetRates(redis, {
            instance: instanceId,
            prefix: `${config.redisPrefix}rates:`,
            logger,
          })
        : undefined,
      laneBatches: built.lanes?.laneBatches,
    },
  )
}

/**
 * Batches waiting for a top-up start on any instance once a deposit covers them; admissions and
 * deposits on any instance wake idle dispatchers and the waiting batches on every instance
 * (NOTIFY on PostgreSQL).
 */
async function openWaiting(
  core: GatewayCore,
  batchChanges: BatchChanges,
  dispatcher: Dispatcher | null,
): Promise<{ waiting: WaitingBatches; nudges: Nudges }> {
  const { config, logger, instanceId } = core
  let nudges: Nudges | null = null
  const waiting = createWaitingBatches(core.store, {
    everyMs: config.dispatch.creditWaitPollMs,
    logger,
    onStarted: (ids) => {
      nudges?.publish()
      // validating → in_progress: their streams report it at once.
      batchChanges.publish(ids)
    },
    onEnded: (ids) => batchChanges.publish(ids),
    onLinesFailed: (count) => core.metrics.linesEnded('failed', count),
    now: core.clock,
  })
  nudges = await openNudges(
    await openStoreChannel(config, NUDGE_CHANNEL),
    instanceId,
    logger,
    () => {
      dispatcher?.nudge()
      waiting.soon()
    },
  )
  return { waiting, nudges }
}
