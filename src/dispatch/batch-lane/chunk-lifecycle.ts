/**
 * One chunk's life (docs/batch-lanes.md): its intent stored before its upload, the provider batch created,
 * followed under the chunk's lease, cancelled at the fallback time or on a cancel, and its
 * results mapped back and recorded. The chunk's lines are leased in the dispatch store under an
 * owner of their own, `chunk:<id>`, renewed at every look: whichever instance holds the chunk
 * renews and records them, so a takeover after a crash needs nothing but the stored ids, and a
 * line is recorded once (the store ignores outcomes of a lease that was lost).
 */
import {
  anthropicBatchInput,
  mapAnthropicBatchResults,
  mapOpenAIBatchOutput,
  openAIBatchInput,
  type AnthropicBatchClient,
  type ChunkLineResult,
  type ChunkRequest,
  type OpenAIBatchClient,
} from '../../../providers/batch-api/index.ts'
import type { ChunkApiEndpoint, ChunkLine } from '../../../providers/batch-api/types.ts'
import { upstreamError } from '../../../providers/classify-error.ts'
import type { UpstreamError, Usage } from '../../../providers/types.ts'
import type { BatchLaneSettings } from '../../catalog/batch-lane.ts'
import type { ModelEntry, Offering } from '../../catalog/catalog-file.ts'
import { offeringName } from '../../catalog/lanes.ts'
import type {
  ChunkEndpoint,
  ChunkLineRef,
  ChunkRecord,
  ChunkStore,
} from '../../store/batch-chunks/chunk-store.ts'
import {
  CHUNK_LINE_OWNER_PREFIX,
  type ClaimedLine,
  type DispatchStore,
  type LineOutcome,
} from '../../store/store.ts'
import type { CountedLine } from '../count-outcomes.ts'
import { lineRequest } from '../line-request.ts'
import type { RetryPolicy } from '../retry-policy.ts'
import { findAnthropicCopies, findChunk } from './find-chunk.ts'
import { followAction, nextPollAt } from './follow-schedule.ts'
import { mapChunkResults } from './map-chunk-results.ts'
import { askedBody } from './running-lines.ts'
import { judgeStoredLine } from '../judge-answer.ts'
import type { JudgeVerdict, SchemaChecks } from '../../schemas/schema-checks.ts'
import type { Billed } from '../line-ceiling.ts'
import type { LineRecord } from '../../domain.ts'
import type { Logger } from '../../telemetry/logger.ts'
import type { LaneFailures } from './lane-failures.ts'
import { limitsOf } from '../../catalog/catalog-file.ts'
import type { WaitingReporter } from '../waiting-reporter.ts'

/** What a chunk's life needs: its stores, its provider's batch client and the lane. */
export interface ChunkDeps {
  chunks: ChunkStore
  lines: Pick<DispatchStore, 'renewLeases' | 'recordOutcomes' | 'batchStatuses'>
  client: OpenAIBatchClient | AnthropicBatchClient
  /** The API the lane's provider takes lines in as they came, besides chat (laneSpeaks). */
  speaks: 'messages' | 'responses' | null
  /**
   * These lines of the batch as stored (running-lines.ts): a Responses line's answer from a lane
   * that does not speak the Responses API is translated into its Response with its body, every
   * answer is judged against its response_format (`schemaChecks`) and billed by the line's own
   * ceiling (`billed`).
   */
  runningLines(batchId: string, lineNos: readonly number[]): Promise<Map<number, LineRecord>>
  /** What a line's answer is billed (line-ceiling.ts laneLineBilled). */
  billed(line: LineRecord, usage: Usage, costUsd: string): Billed
  /** The usage an answer that reported none is billed on (laneLineUsageOnBound). */
  usageOnBound(line: LineRecord, answer: Record<string, unknown>): Usage | null
  /**
   * Where answers are judged against their line's json_schema (the gateway's schema threads), as
   * the live lanes judge them (judge-answer.ts); unset, in-process (inline-checks.ts).
   */
  schemaChecks?: SchemaChecks
  /** Where a line billed past its ceiling is told (`line.cost_overrun`), as run here. */
  logger?: Logger
  offering: Offering
  /** The catalog model the offering is of: the chunk's lines name it. */
  model: ModelEntry
  settings: BatchLaneSettings
  /** Told each recorded line's outcome, its batch's account and model, and what it was charged (the usage report, /metrics). */
  onOutcome?: (outcome: LineOutcome, line: CountedLine, chargedUsd: string) => void
  /** Told why a batch's lane lines wait (a provider batch refused whole), and when they move. */
  waiting?: Pick<WaitingReporter, 'laneRefused' | 'progressed'>
  retry: RetryPolicy
  /** This instance: it holds chunk leases under this name. */
  holder: string
  leaseMs: number
  /** Whole failures of this lane's provider batches, per Multigrid batch: the lines wait longer. */
  failures: LaneFailures
  /**
   * Each look renews the lines' leases this far past the later of now and the chunk's fallback
   * time (lineLeaseUntil): past a chunk lease, so a taker renews in time.
   */
  lineLeaseMs: number
  now: () => number
}

/**
 * Until when a chunk's lines are leased. The chunk is in the store and any instance follows it,
 * so its lines stay leased until its fallback time and a look past it, however long the
 * instances are down: a lease run out sooner would send the lines again, in another provider
 * batch or live, beside the copy upstream. At the fallback the chunk is cancelled and its lines
 * recorded; if nothing follows it by then, the lease runs out and the live lanes take the lines.
 */
export const lineLeaseUntil = (
  deps: Pick<ChunkDeps, 'lineLeaseMs'>,
  fallbackAtMs: number,
  nowMs: number,
): number => Math.max(nowMs, fallbackAtMs) + deps.lineLeaseMs

/** The dispatch-store owner of a chunk's lines. */
export const lineOwnerOf = (chunkId: string): string => `${CHUNK_LINE_OWNER_PREFIX}${chunkId}`

/**
 * Starts a chunk of lines already claimed under lineOwnerOf(chunkId): stores the intent, then
 * uploads (OpenAI) and creates the provider batch. A failure hands the lines back unsent, for
 * the other lanes, except a lost create after an upload, which the next look finds or repeats.
 */
export async function submitChunk(
  deps: ChunkDeps,
  chunk: {
    id: string
    batchId: string
    accountId: string
    endpoint: ChunkEndpoint
    /** deadline_at − fallback_hours of the batch (ms). */
    fallbackAtMs: number
    lines: ClaimedLine[]
  },
): Promise<void> {
  const { chunks, offering, holder } = deps
  const now = deps.now()
  await chunks.createChunk(
    {
      id: chunk.id,
      batchId: chunk.batchId,
      offering: offeringName(offering),
      provider: offering.provider,
      upstreamModel: offering.upstream_model,
      endpoint: chunk.endpoint,
      model: deps.model.id,
      accountId: chunk.accountId,
      fallbackAtMs: chunk.fallbackAtMs,
      lineNos: chunk.lines.map((line) => line.lineNo),
      attempts: chunk.lines.map((line) => line.attempts),
    },
    now,
    { owner: holder, untilMs: now + deps.leaseMs },
  )
  // The intent is stored: whoever follows it answers for the lines now (lineLeaseUntil).
  await deps.lines.renewLeases(lineOwnerOf(chunk.id), lineLeaseUntil(deps, chunk.fallbackAtMs, now))
  const client = deps.client
  const built = chunk.lines.map((line, index) => chunkLine(line, index + 1, deps.speaks))
  const refused = built.filter((line): line is ChunkLineResult => 'type' in line)
  const request: ChunkRequest = {
    chunkId: chunk.id,
    endpoint: providerEndpoint(chunk.endpoint, deps.speaks),
    model: offering.upstream_model,
    maxTokensParam: offering.max_tokens_param,
    modelLimits: limitsOf(deps.model),
    lines: built.filter((line): line is ChunkLine => !('type' in line)),
  }
  const states = statesOf(chunk.lines)
  const record = await chunks.getChunk(chunk.id)
  if (record === null) return
  // Lines this provider's batch API cannot take are settled now; the others go.
  if (refused.length > 0) await recordResults(deps, record, reportedIn(states, refused), refused)
  if (request.lines.length === 0) return done(deps, record, { state: 'ended' })
  // Cancelled since its lines were claimed: nothing is uploaded or created for it.
  if (!(await batchRuns(deps, chunk.batchId)))
    return abandon(deps, record, states, { reason: STOPPED })
  if (client.kind === 'openai') {
    const file = await client.upload(chunk.id, openAIBatchInput(request))
    if (!file.ok) return refusedWhole(deps, record, states, refusalOf(file.error))
    await chunks.updateChunk(holder, chunk.id, { inputFileId: file.value }, deps.now())
    const created = await client.create(request, file.value)
    if (!created.ok) return createFailed(deps, record, states, created.error)
    return submitted(deps, record, created.value.id)
  }
  const input = anthropicBatchInput(request, offering.provider)
  // The lines its translation refused are settled now; the others wait for the batch.
  if (input.refused.length > 0)
    await recordResults(deps, record, reportedIn(states, input.refused), input.refused)
  const created = await client.create(input)
  // A create that may have reached Anthropic (a timeout, a 5xx) is looked at again: a copy
  // made meanwhile is cancelled before the lines go back (resumeIntent).
  if (!created.ok) return createFailed(deps, record, states, created.error)
  return submitted(deps, record, created.value.id)
}

/**
 * A claimed line as a chunk's line: its chat body, and the request as it came where the
 * provider's batch API speaks its API (`speaks`) — a Messages line's for an Anthropic batch
 * (docs/clients/anthropic-sdk.md), a Responses line's for an OpenAI one whose provider speaks the
 * Responses API; elsewhere it goes as its chat translation. A line the provider's batch API
 * cannot take as it is — one whose fields only another kind takes — never gets here (the engine
 * hands it back, laneForLine) unless the catalog changed since: then it is refused, a final
 * `invalid_request`, as the live lanes refuse it (run-line.ts).
 */
function chunkLine(
  line: ClaimedLine,
  position: number,
  speaks: ChunkDeps['speaks'],
): ChunkLine | ChunkLineResult {
  const request = lineRequest(
    JSON.parse(line.input) as { url: string; body: Record<string, unknown> },
  )
  const refuse = (message: string): ChunkLineResult => ({
    position,
    type: 'errored',
    error: upstreamError('invalid_request', message),
  })
  if ('problem' in request) return refuse(request.problem)
  const native = request.native
  if (native && native.api === speaks) return { position, body: request.body, native: native.body }
  if (native?.untranslated) return refuse(native.untranslated)
  return { position, body: request.body }
}

/**
 * The provider endpoint a chunk's lines go to: a Message Batch's as chat (each passed through in
 * its ChunkLine.native where the provider speaks Messages), a Responses chunk's as chat where the
 * provider does not speak the Responses API.
 */
const providerEndpoint = (
  endpoint: ChunkEndpoint,
  speaks: ChunkDeps['speaks'],
): ChunkApiEndpoint =>
  endpoint === 'messages' || (endpoint === 'responses' && speaks !== 'responses')
    ? 'chat'
    : endpoint

/**
 * Whether the chunk's Multigrid batch still runs. A cancel asks the lanes to cancel its chunks
 * (requestCancel), but a chunk still being uploaded or created then, or a cancel made on an
 * instance without lanes, would miss it: each look asks the batch itself too.
 */
async function batchRuns(deps: ChunkDeps, batchId: string): Promise<boolean> {
  const statuses = await deps.lines.batchStatuses([batchId])
  return statuses[batchId] === 'in_progress'
}

/** Looks at a chunk this instance holds (claimed from the chunk store) and moves it on. */
export async function followChunk(deps: ChunkDeps, chunk: ChunkRecord): Promise<void> {
  const { fallbackAtMs } = chunk
  const now = deps.now()
  await deps.lines.renewLeases(lineOwnerOf(chunk.id), lineLeaseUntil(deps, fallbackAtMs, now))
  const states = await deps.chunks.chunkLines(chunk.id)
  const stopped = chunk.state === 'cancelling' || !(await batchRuns(deps, chunk.batchId))
  if (chunk.providerBatchId === null) return resumeIntent(deps, chunk, states, stopped)
  const read = await deps.client.getBatch(chunk.providerBatchId)
  if (!read.ok) return lookFailed(deps, chunk, read.error, fallbackAtMs)
  const action = followAction(read.value.status.unified, {
    nowMs: now,
    fallbackAtMs,
    cancelRequested: stopped,
  })
  const times = { pollMs: deps.settings.pollMs, fallbackAtMs }
  if (action === 'wait')
    return done(deps, chunk, { nextPollAt: nextPollAt(times, 0, now), pollFailures: 0 })
  if (action === 'return_all')
    return refusedWhole(deps, chunk, states, {
      reason: batchFailed(read.value.failureCode),
      answered: true,
    })
  if (action === 'cancel') {
    const cancelled = await deps.client.cancelBatch(chunk.providerBatchId)
    if (!cancelled.ok) return lookFailed(deps, chunk, cancelled.error, fallbackAtMs)
    // Looked at again soon: a cancelled batch ends within minutes, what it finished is read then.
    const soon = now + Math.min(deps.settings.pollMs, 60_000)
    return done(deps, chunk, { state: 'cancelling', nextPollAt: soon, pollFailures: 0 })
  }
  const results = await readResults(deps, read.value)
  if (!results.ok) return lookFailed(deps, chunk, results.error, fallbackAtMs)
  // Every line of an ended batch is settled now: one it did not report goes back to pending.
  await recordResults(deps, chunk, states, results.value)
  deps.failures.worked(chunk.batchId, chunk.offering)
  deps.waiting?.progressed(chunk.batchId, offeringName(deps.offering))
  return done(deps, chunk, { state: 'ended' })
}

function statesOf(lines: readonly ClaimedLine[]): ChunkLineRef[] {
  return lines.map((line, index) => ({
    position: index + 1,
    lineNo: line.lineNo,
    attempts: line.attempts,
  }))
}

/**
 * Records an outcome for each of these lines from the results: one the results do not report
 * goes back to pending (mapChunkResults).
 */
async function recordResults(
  deps: ChunkDeps,
  chunk: Pick<ChunkRecord, 'id' | 'batchId' | 'accountId' | 'createdAt' | 'endpoint'>,
  states: readonly ChunkLineRef[],
  results: readonly ChunkLineResult[],
): Promise<void> {
  const byPosition = new Map(results.map((result) => [result.position, result]))
  const outcomes: LineOutcome[] = []
  // A slice at a time: a chunk of up to 100,000 lines is read back and billed a page of lines
  // at a time, the event loop free between pages.
  for (let start = 0; start < states.length; start += RESULTS_SLICE) {
    const slice = states.slice(start, start + RESULTS_SLICE)
    const sliceResults = slice.flatMap((state) => byPosition.get(state.position) ?? [])
    outcomes.push(...(await sliceOutcomes(deps, chunk, slice, sliceResults)))
  }
  const { charged } = await deps.lines.recordOutcomes(lineOwnerOf(chunk.id), outcomes, deps.now())
  // Told and counted once recorded, at what each was charged: a lease lost to a takeover, whose
  // holder recorded the line, counts nothing here.
  const { accountId } = chunk
  const counted = accountId === null ? null : { accountId, model: () => deps.model.id }
  outcomes.forEach((outcome, i) => {
    const usd = charged[i]
    if (usd === null || usd === undefined) return
    if (outcome.kind === 'succeeded' && outcome.ceilingUsd !== undefined)
      deps.logger?.warn('line.cost_overrun', {
        batch_id: outcome.batchId,
        account_id: accountId,
        line: outcome.lineNo,
        provider: outcome.provider,
        ceiling_usd: outcome.ceilingUsd,
        cost_usd: outcome.costUsd,
      })
    if (counted) deps.onOutcome?.(outcome, counted, usd)
  })
}

/** Lines whose results are mapped and billed at once (recordResults). */
const RESULTS_SLICE = 1000

/**
 * One slice's outcomes. Its lines are read back from the store only when an answer needs them:
 * to bill it by its own ceiling, to judge it against its response_format, or to build a
 * Responses line's Response from its request.
 */
async function sliceOutcomes(
  deps: ChunkDeps,
  chunk: Pick<ChunkRecord, 'batchId' | 'accountId' | 'createdAt' | 'endpoint'>,
  slice: readonly ChunkLineRef[],
  results: readonly ChunkLineResult[],
): Promise<LineOutcome[]> {
  // Lines in a provider's own API sent as chat to a lane that does not speak it: each answer
  // becomes its Response or message, with the request it answers (its model as the caller named it).
  const translated =
    (chunk.endpoint === 'responses' || chunk.endpoint === 'messages') &&
    deps.speaks !== chunk.endpoint
  const lines = results.some((result) => result.type === 'succeeded')
    ? await deps.runningLines(
        chunk.batchId,
        slice.map((state) => state.lineNo),
      )
    : new Map<number, LineRecord>()
  const askedBodies = translated
    ? new Map([...lines].map(([lineNo, line]) => [lineNo, askedBody(line)]))
    : undefined
  const verdicts = await judgeAnswers(deps, chunk, slice, { lines, results })
  const now = deps.now()
  return mapChunkResults(withBatch(chunk.batchId, slice), results, {
    asked: chunk.endpoint === 'messages' || chunk.endpoint === 'responses' ? chunk.endpoint : null,
    askedBodies,
    offering: deps.offering,
    model: deps.model,
    retry: deps.retry,
    nowMs: now,
    latencyMs: now - chunk.createdAt,
    billed: (lineNo, usage, costUsd) => {
      const line = lines.get(lineNo)
      return line ? deps.billed(line, usage, costUsd) : { costUsd }
    },
    usageOnBound: (lineNo, answer) => {
      const line = lines.get(lineNo)
      return line ? deps.usageOnBound(line, answer) : null
    },
    verdicts,
  })
}

/**
 * Each answered line's verdict against its response_format, by line number, judged as a live
 * answer is (judge-answer.ts), in its account's turn on the schema threads.
 */
async function judgeAnswers(
  deps: Pick<ChunkDeps, 'schemaChecks'>,
  chunk: Pick<ChunkRecord, 'batchId' | 'accountId'>,
  slice: readonly ChunkLineRef[],
  answered: { lines: ReadonlyMap<number, LineRecord>; results: readonly ChunkLineResult[] },
): Promise<Map<number, JudgeVerdict | null>> {
  const owner = chunk.accountId ?? chunk.batchId
  const lineNos = new Map(slice.map((state) => [state.position, state.lineNo]))
  const judged = answered.results.flatMap((result) => {
    const lineNo = lineNos.get(result.position)
    const line = lineNo === undefined ? undefined : answered.lines.get(lineNo)
    if (!line || result.type !== 'succeeded') return []
    const verdict = judgeStoredLine(line.input, result.body, owner, deps.schemaChecks)
    return [verdict.then((v) => [line.lineNo, v] as const)]
  })
  return new Map(await Promise.all(judged))
}

/** The lines these results report (each line's outcome depends on its own result alone). */
function reportedIn(
  states: readonly ChunkLineRef[],
  results: readonly ChunkLineResult[],
): ChunkLineRef[] {
  const reported = new Set(results.map((result) => result.position))
  return states.filter((state) => reported.has(state.position))
}

const withBatch = (batchId: string, states: readonly ChunkLineRef[]) =>
  states.map((state) => ({ ...state, batchId }))

/** Why a chunk is given up whose Multigrid batch was cancelled or ended before it was sent. */
const STOPPED = 'the batch stopped before its chunk was sent'

/** Why a chunk whose provider batch failed as a whole is given up. */
const batchFailed = (code: string | null) =>
  code ? `the provider batch failed: ${code}` : 'not sent'

/**
 * Every line back to pending without an attempt, and the chunk given up for `reason` (else "not
 * sent"); the lines are due again at `notBefore` (ms; else now). `refused`: the provider refused
 * the chunk, so it reached the provider (ChunkPatch.refusedAt).
 */
async function abandon(
  deps: ChunkDeps,
  chunk: Pick<ChunkRecord, 'id' | 'batchId'>,
  states: readonly ChunkLineRef[],
  {
    reason = 'not sent',
    notBefore = deps.now(),
    refused = false,
  }: { reason?: string; notBefore?: number; refused?: boolean } = {},
): Promise<void> {
  const now = deps.now()
  const outcomes: LineOutcome[] = states.map((state) => ({
    batchId: chunk.batchId,
    lineNo: state.lineNo,
    kind: 'retry',
    notBefore,
    unsent: true,
  }))
  await deps.lines.recordOutcomes(lineOwnerOf(chunk.id), outcomes, now)
  const refusedAt = refused ? now : undefined
  await done(deps, chunk, { state: 'abandoned', error: reason, refusedAt })
}

/**
 * Why a chunk was refused as a whole, and whether the provider said so: an answer (a 4xx, a 5xx,
 * a failed provider batch) but not a busy one, which says it has no room, nor no answer at all
 * (an unreachable provider). A chunk the provider answered has started its batch
 * (start-in-time.ts), as a live call that fails uses an attempt.
 */
interface Refusal {
  reason: string
  answered: boolean
}

const refusalOf = (error: UpstreamError): Refusal => ({
  reason: error.message,
  answered: error.status !== null && error.kind !== 'busy',
})

/**
 * The provider refused the chunk as a whole (its batch `failed`, its upload or create refused):
 * given up, its lines back to pending without an attempt, due after a wait that doubles with each
 * such failure of the lane for their batch in a row (2, 4, 8, 16 × poll_s), never past the
 * lane's close, deadline − max(min_hours_left, fallback_hours), when the live lanes take them
 * (at once when it has closed). Retried at once, a failure that lasts would upload the lines
 * again every poll_s.
 */
function refusedWhole(
  deps: ChunkDeps,
  chunk: Pick<ChunkRecord, 'id' | 'batchId' | 'offering' | 'fallbackAtMs'>,
  states: readonly ChunkLineRef[],
  { reason, answered }: Refusal,
): Promise<void> {
  const inARow = deps.failures.failed(chunk.batchId, chunk.offering)
  const { minLeftMs, fallbackMs, pollMs } = deps.settings
  // fallbackAtMs is deadline − fallback_hours: the lane takes no line min_hours_left before it.
  const closesAtMs = chunk.fallbackAtMs - Math.max(0, minLeftMs - fallbackMs)
  const now = deps.now()
  const notBefore =
    now < closesAtMs ? nextPollAt({ pollMs, fallbackAtMs: closesAtMs }, inARow, now) : now
  deps.waiting?.laneRefused(chunk.batchId, offeringName(deps.offering), {
    reason,
    retryAtMs: notBefore,
    fallbackAtMs: closesAtMs,
  })
  return abandon(deps, chunk, states, { reason, notBefore, refused: answered })
}

/** A create that failed after the upload: retried on the next look if it may work, else given up. */
async function createFailed(
  deps: ChunkDeps,
  chunk: ChunkRecord,
  states: readonly ChunkLineRef[],
  error: UpstreamError,
): Promise<void> {
  if (!error.retryable) return refusedWhole(deps, chunk, states, refusalOf(error))
  const next = deps.now() + deps.settings.pollMs
  return done(deps, chunk, { nextPollAt: next, pollFailures: 1, error: error.message })
}

async function submitted(deps: ChunkDeps, chunk: ChunkRecord, providerBatchId: string) {
  // A batch cancelled while its chunk was being created: the next look, now, cancels it.
  const now = deps.now()
  const next = (await batchRuns(deps, chunk.batchId)) ? now + deps.settings.pollMs : now
  await done(deps, chunk, {
    state: 'submitted',
    providerBatchId,
    nextPollAt: next,
    pollFailures: 0,
  })
}

/**
 * An intent without a provider batch id: its holder died or its create failed. OpenAI: the
 * create is looked for by `metadata.mg_chunk` and adopted when found (to be cancelled if the batch
 * has `stopped`), made from the uploaded file when not, unless it has. Without an upload (or on
 * Anthropic, which has no metadata) the lines go back.
 */
async function resumeIntent(
  deps: ChunkDeps,
  chunk: ChunkRecord,
  states: ChunkLineRef[],
  stopped: boolean,
) {
  const client = deps.client
  if (client.kind === 'anthropic') return cancelCopies(deps, client, chunk, states)
  if (chunk.inputFileId === null) return abandon(deps, chunk, states)
  const found = await findChunk(client, chunk.id)
  if (!found.ok) return createFailed(deps, chunk, states, found.error)
  if (found.value !== null) return submitted(deps, chunk, found.value.id)
  if (stopped) return abandon(deps, chunk, states, { reason: STOPPED })
  const created = await client.create(
    { chunkId: chunk.id, endpoint: providerEndpoint(chunk.endpoint, deps.speaks) },
    chunk.inputFileId,
  )
  if (!created.ok) return createFailed(deps, chunk, states, created.error)
  return submitted(deps, chunk, created.value.id)
}

/** How long after its intent a lost create may have reached the provider, with the clocks' skew. */
export const COPY_WINDOW_MS = 10 * 60_000
const CLOCK_SKEW_MS = 60_000
/** Failed looks for copies before the lines go back anyway. */
const COPY_LOOKS = 3

/**
 * An Anthropic intent without a provider batch id (docs/batch-lanes.md): its create may have
 * reached Anthropic before a crash or a timeout. Such a copy is cancelled, then the lines go
 * back to pending; what the copy finished before its cancel is not recorded (its lines run again).
 */
async function cancelCopies(
  deps: ChunkDeps,
  client: AnthropicBatchClient,
  chunk: ChunkRecord,
  states: ChunkLineRef[],
) {
  const copies = await findAnthropicCopies(client, {
    fromMs: chunk.createdAt - CLOCK_SKEW_MS,
    toMs: Math.max(chunk.createdAt, chunk.updatedAt) + COPY_WINDOW_MS,
    maxRequests: chunk.lineCount,
    followed: async (id) => (await deps.chunks.chunkOfProviderBatch(chunk.provider, id)) !== null,
  })
  let failed = copies.ok ? null : copies.error
  for (const copy of copies.ok ? copies.value : []) {
    const cancelled = await client.cancelBatch(copy.id)
    if (!cancelled.ok) failed = cancelled.error
  }
  if (failed !== null && chunk.pollFailures + 1 < COPY_LOOKS) {
    const times = { pollMs: deps.settings.pollMs, fallbackAtMs: chunk.fallbackAtMs }
    const next = nextPollAt(times, chunk.pollFailures + 1, deps.now())
    return done(deps, chunk, {
      nextPollAt: next,
      pollFailures: chunk.pollFailures + 1,
      error: failed.message,
    })
  }
  return abandon(deps, chunk, states)
}

/** A failed look (5xx, lost connection): the next one backs off, the fallback time kept. */
async function lookFailed(
  deps: ChunkDeps,
  chunk: ChunkRecord,
  error: UpstreamError,
  fallbackAtMs: number,
) {
  const failures = chunk.pollFailures + 1
  const times = { pollMs: deps.settings.pollMs, fallbackAtMs }
  const next = nextPollAt(times, failures, deps.now())
  await done(deps, chunk, { nextPollAt: next, pollFailures: failures, error: error.message })
}

/** Writes what changed and gives the chunk's lease up. */
async function done(
  deps: ChunkDeps,
  chunk: Pick<ChunkRecord, 'id'>,
  patch: Parameters<ChunkStore['updateChunk']>[2],
) {
  await deps.chunks.updateChunk(deps.holder, chunk.id, patch, deps.now())
  await deps.chunks.releaseChunk(deps.holder, chunk.id)
}

/** The results of an ended provider batch: OpenAI's two files, Anthropic's results. */
async function readResults(
  deps: ChunkDeps,
  batch: { id: string; outputFileId: string | null; errorFileId: string | null },
): Promise<{ ok: true; value: ChunkLineResult[] } | { ok: false; error: UpstreamError }> {
  const client = deps.client
  const key = null
  if (client.kind === 'anthropic') {
    const text = await client.readResults(batch.id)
    if (!text.ok) return text
    return {
      ok: true,
      value: mapAnthropicBatchResults(text.value, key, Math.floor(deps.now() / 1000)),
    }
  }
  const value: ChunkLineResult[] = []
  for (const id of [batch.outputFileId, batch.errorFileId]) {
    if (id === null) continue
    const text = await client.readFile(id)
    if (!text.ok) return text
    value.push(...mapOpenAIBatchOutput(text.value, key))
  }
  return { ok: true, value }
}
