/**
 * The batch-lane engine (docs/batch-lanes.md): on each tick it forms chunks from the runnable batches whose
 * lines go to a batch lane (their marks, laneForLine), and follows the due chunks of every instance under
 * their leases (chunk-lifecycle.ts). It holds nothing a crash would lose: the chunks and their
 * lines' leases are in the store, and a takeover needs only them.
 *
 * The lines it claims are those marked at admission for a batch lane that is open now
 * (NewLine.batchLane, openBatchLanes), one lane at a time, wherever they stand in the batch; the
 * live lanes claim the others meanwhile. Each claimed line is judged again (laneForLine): one the
 * catalog no longer sends to that lane is released to the live lanes.
 */
import type { AnthropicBatchClient, OpenAIBatchClient } from '../../../providers/batch-api/index.ts'
import { batchLaneSettings } from '../../catalog/batch-lane.ts'
import type { ModelEntry } from '../../catalog/catalog-file.ts'
import { laneKey } from '../../catalog/lane-mark.ts'
import type { Catalog } from '../../catalog/catalog.ts'
import { newId } from '../../domain.ts'
import type { ChunkRecord, ChunkStore } from '../../store/batch-chunks/chunk-store.ts'
import type {
  ClaimedLine,
  DispatchStore,
  LineOutcome,
  RunnableBatch,
  Store,
} from '../../store/store.ts'
import { runningLines } from './running-lines.ts'
import { laneLineBilled, laneLineUsageOnBound } from '../line-ceiling.ts'
import type { SchemaChecks } from '../../schemas/schema-checks.ts'
import type { Logger } from '../../telemetry/logger.ts'
import type { CountedLine } from '../count-outcomes.ts'
import type { RetryPolicy } from '../retry-policy.ts'
import {
  laneForLine,
  chunkEndpoint,
  laneSpeaks,
  openBatchLanes,
  type BatchLaneChoice,
} from './choose-batch-lane.ts'
import { followChunk, lineOwnerOf, submitChunk, type ChunkDeps } from './chunk-lifecycle.ts'
import { MAX_BACKOFF } from './follow-schedule.ts'
import { groupIntoChunks } from './group-chunks.ts'
import { createLaneFailures } from './lane-failures.ts'
import type { WaitingReporter } from '../waiting-reporter.ts'

export interface EngineDeps {
  chunks: ChunkStore
  dispatch: Pick<
    DispatchStore,
    | 'runnableBatches'
    | 'nextLine'
    | 'leaveLane'
    | 'claimLines'
    | 'batchStatuses'
    | 'renewLeases'
    | 'recordOutcomes'
  >
  /** Lines as stored, read back for their results (running-lines.ts). */
  batches: Pick<Store, 'readLines'>
  catalog: Pick<Catalog, 'models' | 'find' | 'routeWithLanes' | 'routeBatch' | 'provider'>
  /** The batch client of a provider with a batch lane. */
  client(provider: string): OpenAIBatchClient | AnthropicBatchClient | undefined
  retry: RetryPolicy
  /** Told each recorded line's outcome, its batch's account and model, and what it was charged (the usage report, /metrics). */
  onOutcome?: (outcome: LineOutcome, line: CountedLine, chargedUsd: string) => void
  /** Told why a batch's lane lines wait (a provider batch refused whole), and when they move. */
  waiting?: Pick<WaitingReporter, 'laneRefused' | 'progressed'>
  logger?: Logger
  /** Where answers are judged against their line's json_schema (ChunkDeps.schemaChecks). */
  schemaChecks?: SchemaChecks
}

/** What a chunk's results are read, judged and billed with: its lines as stored, their ceilings. */
const resultDeps = (
  deps: EngineDeps,
): Pick<ChunkDeps, 'runningLines' | 'billed' | 'usageOnBound' | 'schemaChecks' | 'logger'> => ({
  runningLines: (batchId, lineNos) => runningLines(deps.batches, batchId, lineNos),
  billed: (line, usage, costUsd) => laneLineBilled(deps.catalog, line, usage, costUsd),
  usageOnBound: (line, answer) => laneLineUsageOnBound(deps.catalog, line, answer),
  schemaChecks: deps.schemaChecks,
  logger: deps.logger,
})

/** A batch lane and the catalog model whose offering it is. */
type Lane = BatchLaneChoice & { model: ModelEntry }

export interface EngineOptions {
  /** This instance's name for chunk leases. */
  holder: string
  /** How long one look may take before another instance may take the chunk. */
  leaseMs: number
  now?: () => number
}

export interface BatchLaneEngine {
  /** Forms chunks from runnable batches, then follows due chunks; returns what it did. */
  tick(): Promise<{ submitted: number; followed: number }>
}

type Parsed = { url: string; body: { model?: unknown; provider?: unknown } }

export function createBatchLaneEngine(deps: EngineDeps, options: EngineOptions): BatchLaneEngine {
  const now = options.now ?? Date.now
  const failures = createLaneFailures()

  /** The line's lane now, if it is still the one it was marked for (laneKey). */
  const laneFor = (input: string, mark: string, batch: RunnableBatch): Lane | null => {
    const choice = laneForLine(deps.catalog, input, {
      deadlineMs: batch.deadlineAt * 1000,
      nowMs: now(),
      hasClient: (provider) => deps.client(provider) !== undefined,
    })
    return choice && laneKey(choice.model.id, choice.offering.provider) === mark ? choice : null
  }

  function chunkDeps(choice: Lane): ChunkDeps {
    return {
      chunks: deps.chunks,
      lines: deps.dispatch,
      client: deps.client(choice.offering.provider)!,
      speaks: laneSpeaks(deps.catalog.provider(choice.offering.provider)),
      ...resultDeps(deps),
      offering: choice.offering,
      model: choice.model,
      settings: choice.settings,
      onOutcome: deps.onOutcome,
      waiting: deps.waiting,
      retry: deps.retry,
      holder: options.holder,
      leaseMs: options.leaseMs,
      failures,
      // Past the longest gap between two looks (the backoff's) and a takeover's lease.
      lineLeaseMs: choice.settings.pollMs * (MAX_BACKOFF + 1) + 2 * options.leaseMs,
      now,
    }
  }

  /**
   * Claims one chunk's worth of a batch's lane lines (NewLine.batchLane) of one lane, wherever
   * they stand in the batch; false if it has none due.
   */
  async function formChunk(batch: RunnableBatch): Promise<boolean> {
    if (!batch.laneLines) return false
    const at = now()
    const open = openBatchLanes(deps.catalog, {
      deadlineMs: batch.deadlineAt * 1000,
      nowMs: at,
      hasClient: (provider) => deps.client(provider) !== undefined,
    })
    if (open.length === 0) return false
    // The first lane line, looked at and not claimed: a claim would start the batch, and one
    // that runs live or not at all would then never end capacity_unavailable (docs/open-models.md).
    const first = await deps.dispatch.nextLine(batch.id, at, open)
    if (first === null) return false
    const mark = first.batchLane!
    const choice = laneFor(first.input, mark, batch)
    if (!choice) {
      // The catalog changed since it was marked: the live lanes take it once its mark is back.
      await deps.dispatch.leaveLane(batch.id, [first.lineNo])
      return true
    }
    const chunkId = newId('chk_')
    const owner = lineOwnerOf(chunkId)
    const cd = chunkDeps(choice)
    const fallbackAtMs = batch.deadlineAt * 1000 - choice.settings.fallbackMs
    // Short until the chunk's intent is stored (submitChunk lengthens it): lines claimed by an
    // instance that dies before come back soon.
    const lines = await deps.dispatch.claimLines({
      batchId: batch.id,
      owner,
      limit: choice.settings.chunkLines,
      nowMs: at,
      leaseUntilMs: at + cd.lineLeaseMs,
      lanes: { only: mark },
    })
    if (lines.length === 0) return false
    const mine: ClaimedLine[] = []
    const changed: ClaimedLine[] = []
    for (const line of lines) (laneFor(line.input, mark, batch) ? mine : changed).push(line)
    // Lines the catalog no longer sends to this lane go to the live lanes, their marks given back.
    await deps.dispatch.leaveLane(
      batch.id,
      changed.map((line) => line.lineNo),
    )
    await handBack(owner, changed, at)
    const endpoint = chunkEndpoint((JSON.parse(first.input) as Parsed).url)
    const { chunks } = groupIntoChunks(
      mine.map((line) => ({
        lineNo: line.lineNo,
        upstreamModel: choice.offering.upstream_model,
        endpoint,
        bytes: Buffer.byteLength(line.input),
      })),
      { ...choice.settings },
    )
    // One chunk under this owner: lines past the byte cap of the first go back for the next.
    const [planned] = chunks
    const kept = new Set(planned?.lineNos ?? [])
    await handBack(
      owner,
      mine.filter((line) => !kept.has(line.lineNo)),
      at,
    )
    if (!planned) return true
    const byNo = new Map(mine.map((line) => [line.lineNo, line]))
    await submitChunk(cd, {
      id: chunkId,
      batchId: batch.id,
      accountId: batch.accountId,
      endpoint: planned.endpoint,
      fallbackAtMs,
      lines: planned.lineNos.map((lineNo) => byNo.get(lineNo)!),
    })
    return true
  }

  async function handBack(owner: string, lines: readonly ClaimedLine[], notBefore: number) {
    if (lines.length === 0) return
    const outcomes: LineOutcome[] = lines.map((line) => ({
      batchId: line.batchId,
      lineNo: line.lineNo,
      kind: 'retry',
      notBefore,
      unsent: true,
    }))
    await deps.dispatch.recordOutcomes(owner, outcomes, now())
  }

  return {
    async tick() {
      let submitted = 0
      const batches = await deps.dispatch.runnableBatches(now(), 100)
      for (const batch of batches) {
        // One chunk a batch a tick: chunks of every batch come out in turn.
        if (await formChunk(batch)) submitted++
      }
      let followed = 0
      const due = await deps.chunks.claimChunks(options.holder, 16, now(), now() + options.leaseMs)
      for (const chunk of due) {
        const choice = choiceOf(deps, chunk)
        if (!choice) {
          await deps.chunks.releaseChunk(options.holder, chunk.id)
          continue
        }
        await followChunk(chunkDeps(choice), chunk)
        followed++
      }
      return { submitted, followed }
    },
  }
}

/**
 * The lane a chunk is followed on, from the catalog: its model's batch offering of that
 * provider and upstream model (two models may list the same one, each at its own price). A
 * chunk stored before its model was has the first model listing it.
 */
function choiceOf(deps: EngineDeps, chunk: ChunkRecord): Lane | null {
  const named = chunk.model === null ? undefined : deps.catalog.find(chunk.model)
  const models = named ? [named] : chunk.model === null ? deps.catalog.models : []
  for (const model of models)
    for (const offering of model.offerings) {
      if (offering.lane !== 'batch' || offering.provider !== chunk.provider) continue
      if (offering.upstream_model !== chunk.upstreamModel) continue
      const kind = deps.catalog.provider(offering.provider)?.kind
      if (!kind || !deps.client(offering.provider)) continue
      return { offering, model, settings: batchLaneSettings(offering, kind) }
    }
  return null
}
