/**
 * What one simulator keeps between requests: its options, its seeded random streams, its
 * counters and the state of its modes (GPU pool, LoRA slots, batch jobs). The request handlers
 * (infer.ts, server.ts) are plain functions over it.
 */
import { createAnthropicBatchApi } from './anthropic-batch-api.ts'
import { JobBook, viewJob } from './batch-jobs.ts'
import { GpuQueue } from './gpu-queue.ts'
import { LoraSlots } from './lora-slots.ts'
import { createOpenAIBatchApi } from './openai-batch-api.ts'
import {
  defaultSimulatorOptions,
  mergeOptions,
  type ResolvedSimulatorOptions,
  type SimulatorOptions,
} from './options.ts'
import { createRandom, type Random } from './prng.ts'
import { StatsRecorder, type FaultKind } from './stats.ts'

/** One inference request as it arrived. */
export interface ReceivedRequest {
  path: string
  /** The body exactly as sent, UTF-8 decoded. */
  text: string
  /** Anthropic's `anthropic-beta` header, when one came. */
  anthropicBeta?: string
}

/** What reached the simulator's batch APIs (docs/batch-lanes.md). */
export interface SimBatches {
  created: number
  cancelled: number
  jobs: {
    id: string
    dialect: 'openai' | 'anthropic'
    customIds: string[]
    /** Each request's body as received (Anthropic's params), in the same order. */
    requests: unknown[]
    status: string
    /** How many of its lines it has finished (work stops at a cancel request). */
    done: number
    metadata: Record<string, string> | null
  }[]
}

/** One batch API's routes. */
interface BatchApi {
  handles(path: string): boolean
  handle(request: Request, path: string): Promise<Response>
}

/** Everything a running simulator holds. */
export interface SimState {
  current: ResolvedSimulatorOptions
  /** The fault rates in draw order, rebuilt when the options change rather than per request. */
  faultTable: [FaultKind, number][]
  random: SimRandoms
  stats: StatsRecorder
  received: ReceivedRequest[]
  /** Releases of the requests hanging now (the timeout fault). */
  hanging: Set<() => void>
  inferenceInFlight: number
  nextId: number
  /** The maxRequestsPerSecond token bucket. */
  bucket: { tokens: number; at: number }
  /** GPU-pool mode's admission queue; made on first use so the mode can be switched on live. */
  gpu: GpuQueue | null
  lora: LoraSlots
  book: JobBook
  openaiBatches: BatchApi
  anthropicBatches: BatchApi
  /** http://host:port once listening; the Anthropic batches' results_url starts with it. */
  url: string
}

/**
 * The seeded streams, each its own so one mode's rate does not shift another's draws: faults,
 * jitter (changing it keeps which requests fault), flex refusals, batch lines' server errors.
 */
interface SimRandoms {
  fault: Random
  jitter: Random
  flex: Random
  batch: Random
}

function randomsOf(seed: number): SimRandoms {
  return {
    fault: createRandom(seed),
    jitter: createRandom(seed ^ 0x9e3779b9),
    flex: createRandom(seed ^ 0x5bd1e995),
    batch: createRandom(seed ^ 0x27d4eb2f),
  }
}

function faultTableOf(o: ResolvedSimulatorOptions): [FaultKind, number][] {
  return [
    ['rate_limited', o.rate429],
    ['server_error', o.errorRate],
    ['timeout', o.timeoutRate],
    ['reset', o.resetRate],
    ['malformed', o.malformedRate],
    ['cut', o.cutRate],
    ['no_usage', o.noUsageRate],
    ['trickle', o.trickleRate],
  ]
}

/** A fresh simulator's state from its starting options. */
export function createSimState(options: SimulatorOptions): SimState {
  const current = mergeOptions(defaultSimulatorOptions, options)
  const book = new JobBook()
  // Read at each call, so a new seed (configure) reaches the batch APIs too.
  const drawBatch = () => state.random.batch()
  const state: SimState = {
    current,
    faultTable: faultTableOf(current),
    random: randomsOf(current.seed),
    stats: new StatsRecorder(),
    received: [],
    hanging: new Set(),
    inferenceInFlight: 0,
    nextId: 0,
    // Starts full: the first second may use its whole allowance.
    bucket: { tokens: Number.POSITIVE_INFINITY, at: performance.now() },
    gpu: null,
    lora: new LoraSlots(),
    book,
    openaiBatches: createOpenAIBatchApi(book, () => state.current, drawBatch),
    anthropicBatches: createAnthropicBatchApi(
      book,
      () => state.current,
      drawBatch,
      () => state.url,
    ),
    url: '',
  }
  return state
}

/** Changes behaviour from the next request on; port and hostname stay as started. */
export function configure(state: SimState, partial: SimulatorOptions): void {
  const { port: _port, hostname: _hostname, ...rest } = partial
  state.current = mergeOptions(state.current, rest)
  state.faultTable = faultTableOf(state.current)
  const gpu = state.gpu
  if (gpu !== null) {
    // Switched off: nothing bounds the waiters any more; otherwise the new limits apply.
    if (state.current.gpuCapacity !== null)
      gpu.resize(state.current.gpuCapacity, state.current.gpuMaxQueued)
    else {
      gpu.drain()
      state.gpu = null
    }
  }
  if (partial.seed !== undefined) state.random = randomsOf(state.current.seed)
}

/** The GPU pool, made on first use. */
export function gpuOf(state: SimState): GpuQueue {
  return (state.gpu ??= new GpuQueue(state.current.gpuCapacity ?? 0, state.current.gpuMaxQueued))
}

/** Every provider batch as it stands now, oldest first, plus the counts. */
export function batchesOf(state: SimState): SimBatches {
  return {
    ...state.book.counts,
    jobs: [...state.book.jobs.values()].map((job) => {
      const view = viewJob(job, Date.now())
      return {
        id: job.id,
        dialect: job.dialect,
        customIds: job.lines.map((line) => line.customId),
        requests: job.lines.map((line) => line.request),
        status: view.end ?? (view.cancelling ? 'cancelling' : 'in_progress'),
        done: view.done,
        metadata: job.metadata,
      }
    }),
  }
}
