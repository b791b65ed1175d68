/**
 * The batch lanes as the gateway runs them (docs/batch-lanes.md): the engine ticked in the
 * background, the live dispatcher told which batches the lanes serve, and a Multigrid cancel
 * passed to the batch's provider batches. Made only when the catalog has a usable batch lane.
 */
import type { Catalog } from '../../catalog/catalog.ts'
import type { ChunkStore } from '../../store/batch-chunks/chunk-store.ts'
import type { DispatchStore, LineOutcome, Store } from '../../store/store.ts'
import type { CountedLine } from '../count-outcomes.ts'
import type { SchemaChecks } from '../../schemas/schema-checks.ts'
import type { Logger } from '../../telemetry/logger.ts'
import type { BatchClient } from '../../upstream/batch-clients.ts'
import type { RetryPolicy } from '../retry-policy.ts'
import { createBatchLaneEngine, type EngineDeps } from './batch-lane-engine.ts'
import { createLaneBatches, type LaneBatches } from './lane-batches.ts'
import type { WaitingReporter } from '../waiting-reporter.ts'

export interface BatchLanesDeps {
  store: Pick<Store, 'readLines'>
  /** The engine's calls, and the count the live dispatcher's filter needs (lane-batches.ts). */
  dispatch: EngineDeps['dispatch'] & Pick<DispatchStore, 'laneLinesPending'>
  chunks: ChunkStore
  catalog: Catalog
  clients: ReadonlyMap<string, BatchClient>
  retry: RetryPolicy
  logger: Logger
  /** Told each recorded line's outcome, its batch's account and model, and what it was charged (the usage report, /metrics). */
  onOutcome?: (outcome: LineOutcome, line: CountedLine, chargedUsd: string) => void
  /** Told why a batch's lane lines wait (a provider batch refused whole), and when they move. */
  waiting?: Pick<WaitingReporter, 'laneRefused' | 'progressed'>
  /** Where answers are judged against their line's json_schema: the gateway's schema threads. */
  schemaChecks?: SchemaChecks
}

export interface BatchLanesOptions {
  /** This instance's name for chunk leases. */
  holder: string
  /** How long one look at a chunk may take before another instance may take it over. */
  leaseMs: number
  /** The gap between two ticks when the last one had nothing to do. */
  tickMs: number
}

export interface BatchLanes {
  /** For the live dispatcher: the batches it may claim from. */
  laneBatches: LaneBatches
  /** A Multigrid batch was cancelled: its provider batches are cancelled at the next tick. */
  cancelled(batchId: string): Promise<void>
  start(): void
  /** Ends the tick under way and closes the clients. */
  stop(): Promise<void>
}

/** After a tick that moved something: the next one at once, so a batch's chunks go out in a row. */
const BUSY_GAP_MS = 10

export function createBatchLanes(deps: BatchLanesDeps, options: BatchLanesOptions): BatchLanes {
  const client = (provider: string) => deps.clients.get(provider)
  const engine = createBatchLaneEngine(
    {
      chunks: deps.chunks,
      dispatch: deps.dispatch,
      batches: deps.store,
      catalog: deps.catalog,
      client,
      retry: deps.retry,
      onOutcome: deps.onOutcome,
      waiting: deps.waiting,
      logger: deps.logger,
      schemaChecks: deps.schemaChecks,
    },
    { holder: options.holder, leaseMs: options.leaseMs },
  )
  const laneBatches = createLaneBatches(deps.dispatch, deps.catalog, (p) => deps.clients.has(p))
  let timer: ReturnType<typeof setTimeout> | null = null
  let running: Promise<void> | null = null
  let stopped = false

  const schedule = (ms: number) => {
    if (!stopped) timer = setTimeout(() => (running = run()), ms)
  }
  async function run(): Promise<void> {
    let busy = false
    try {
      const { submitted, followed } = await engine.tick()
      busy = submitted + followed > 0
    } catch (error) {
      deps.logger.warn('batch_lanes.tick_failed', { reason: (error as Error).message })
    }
    running = null
    schedule(busy ? BUSY_GAP_MS : options.tickMs)
  }

  return {
    laneBatches,
    async cancelled(batchId) {
      await deps.chunks.requestCancel(batchId, Date.now())
      if (timer && !running) {
        clearTimeout(timer)
        schedule(0)
      }
    },
    start() {
      schedule(0)
    },
    async stop() {
      stopped = true
      if (timer) clearTimeout(timer)
      await running
      for (const batchClient of deps.clients.values()) await batchClient.close()
    },
  }
}

/** The tick gap: a quarter of the shortest poll interval, within 100 ms – 1 s. */
export function tickMsFor(catalog: Pick<Catalog, 'models'>): number {
  let shortest = 1_000
  for (const model of catalog.models)
    for (const offering of model.offerings)
      if (offering.lane === 'batch') shortest = Math.min(shortest, (offering.poll_s ?? 60) * 250)
  return Math.max(100, shortest)
}
