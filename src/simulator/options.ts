import type { StructuredAnswers } from './structured-reply.ts'
import type { ToolCallIds } from './tool-calls.ts'

/**
 * How the upstream simulator behaves. Every fault is a fraction of inference requests (POST
 * /v1/chat/completions, /v1/embeddings, /v1/messages, /v1/responses); `GET /v1/models` never faults, so health
 * probes see a replica as up exactly while it is running.
 */
export interface SimulatorOptions {
  /** Listen port; 0 picks a free one. */
  port?: number
  /** Listen address. Default 127.0.0.1. */
  hostname?: string
  /** Added before every inference answer except 429s, which real providers send at once. */
  latencyMs?: number
  /** Extra uniform delay in [0, jitterMs) on top of latencyMs. */
  jitterMs?: number
  /** Fraction answered 500. */
  errorRate?: number
  /** Fraction answered 429. */
  rate429?: number
  /**
   * Sent with every 429 when not null. A whole number goes out as `retry-after: N` alone; a
   * fraction (0.05) as `retry-after-ms: 50` plus `retry-after: 1`, the way OpenAI does it.
   */
  retryAfterSeconds?: number | null
  /** More inference requests than this in flight at once are answered 429. */
  maxConcurrency?: number | null
  /** More inference requests than this per second (token bucket, one second of burst) → 429. */
  maxRequestsPerSecond?: number | null
  /** Fraction that never answers: the request hangs until the client gives up or stop(). */
  timeoutRate?: number
  /** Fraction that sends 200 headers and half the body, then resets the connection. */
  resetRate?: number
  /** Fraction answered 200 with a body that is not valid JSON (or a broken SSE event). */
  malformedRate?: number
  /**
   * Fraction whose stream ends cleanly halfway, without the event that ends it ([DONE],
   * message_stop, response.completed): an upstream that stopped short. A whole answer is cut as
   * malformedRate cuts it.
   */
  cutRate?: number
  /** Fraction answered 200 without `usage`. */
  noUsageRate?: number
  /** Fraction whose body is sent in small pieces spread over trickleMs. */
  trickleRate?: number
  /** Default 1000. */
  trickleMs?: number
  /** When set, another or no key is answered 401 (Bearer for OpenAI, x-api-key for Anthropic). */
  requireApiKey?: string | null
  /** Seed of the fault and jitter sequence. Default 1. */
  seed?: number
  /** Embedding length when the request does not ask for `dimensions`. Default 8. */
  embeddingDims?: number
  /** Listed by GET /v1/models. */
  models?: string[]
  /**
   * Reported usage is the honest count × this (rounded up), to play an upstream that bills more
   * than the request allows for. Default 1.
   */
  usageFactor?: number
  /** Keeps the bodies of the latest this-many inference requests, for received(). Default 0. */
  keepBodies?: number
  /**
   * GPU-pool mode, off while null (the default): the simulator plays one vLLM replica that runs
   * at most this many inference requests at once, each held latencyMs (+ jitter), and keeps the
   * rest in a FIFO queue; GET /metrics then serves vLLM's load gauges. May change while running.
   */
  gpuCapacity?: number | null
  /**
   * In GPU-pool mode, more requests than this waiting (beyond the running ones) are answered 503
   * at once, as a vLLM replica with a full queue does. Null: the queue is unbounded.
   */
  gpuMaxQueued?: number | null
  /**
   * Runtime LoRA mode, off while null (the default): the simulator plays a vLLM replica started
   * with --enable-lora --max-loras N and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True. It loads and
   * unloads fine-tunes (POST /v1/load_lora_adapter, /v1/unload_lora_adapter), refuses a load past
   * N, lists loaded fine-tunes in GET /v1/models with their `parent`, and answers a request for a
   * model it neither serves (`models`) nor holds 404 "The model `x` does not exist.".
   */
  maxLoras?: number | null
  /** How long loading one fine-tune takes in LoRA mode. Default 0. */
  loraLoadMs?: number
  /**
   * What a structured request (`response_format` json_object/json_schema, Anthropic's
   * `output_config.format`) is answered with: `valid` JSON for its schema, `not_json`, or
   * `off_schema` JSON; a `[sim:…]` marker in a request's last user message overrides it for that
   * request (structured-reply.ts). Default `valid`.
   */
  structuredAnswers?: StructuredAnswers
  /**
   * How a chat completion names its tool calls: `openai` (`call_…`, the default), or `functions`
   * (`functions.get_weather:0`), as Kimi K2 on vLLM does, ids outside Anthropic's tool_use pattern.
   */
  toolCallIds?: ToolCallIds
  /**
   * Flex mode (docs/pricing.md): a chat request with `service_tier: "flex"` waits this much longer than
   * latencyMs before its answer. Default 0.
   */
  flexLatencyMs?: number
  /**
   * The fraction of flex requests answered 429 with code `resource_unavailable`, as OpenAI does
   * when flex capacity runs out. Drawn from a stream of its own. Default 0.
   */
  flexUnavailableRate?: number
  /**
   * Batch APIs (docs/batch-lanes.md, batch-jobs.ts): how long a provider batch takes from its create to its
   * last line; its lines come due evenly across it. Default 1000.
   */
  batchTurnaroundMs?: number
  /** The fraction of batch lines answered 500 (errored lines), from their own stream. Default 0. */
  batchErrorRate?: number
  /** A provider batch created now expires this long after, with what was due kept. Default null. */
  batchExpireMs?: number | null
  /**
   * How long a provider batch's create takes to answer (both APIs); the batch exists from its
   * answer on. Default 0.
   */
  batchCreateMs?: number
  /** How long a cancelled provider batch stays `cancelling` / `canceling`. Default 0. */
  batchCancelMs?: number
  /** OpenAI batches created now go `failed` with this error code (`token_limit_exceeded`). */
  batchFailCode?: string | null
}

export type ResolvedSimulatorOptions = Required<SimulatorOptions>

export const defaultSimulatorOptions: ResolvedSimulatorOptions = {
  port: 0,
  hostname: '127.0.0.1',
  latencyMs: 0,
  jitterMs: 0,
  errorRate: 0,
  rate429: 0,
  retryAfterSeconds: null,
  maxConcurrency: null,
  maxRequestsPerSecond: null,
  timeoutRate: 0,
  resetRate: 0,
  malformedRate: 0,
  cutRate: 0,
  noUsageRate: 0,
  trickleRate: 0,
  trickleMs: 1000,
  requireApiKey: null,
  seed: 1,
  embeddingDims: 8,
  models: ['sim-chat', 'sim-embed'],
  usageFactor: 1,
  keepBodies: 0,
  gpuCapacity: null,
  gpuMaxQueued: null,
  maxLoras: null,
  loraLoadMs: 0,
  structuredAnswers: 'valid',
  toolCallIds: 'openai',
  flexLatencyMs: 0,
  flexUnavailableRate: 0,
  batchTurnaroundMs: 1000,
  batchErrorRate: 0,
  batchExpireMs: null,
  batchCreateMs: 0,
  batchCancelMs: 0,
  batchFailCode: null,
}

/** Merges `partial` over `base`, ignoring keys whose value is undefined. */
export function mergeOptions(
  base: ResolvedSimulatorOptions,
  partial: SimulatorOptions,
): ResolvedSimulatorOptions {
  const merged = { ...base }
  for (const [key, value] of Object.entries(partial)) {
    if (value !== undefined) Object.assign(merged, { [key]: value })
  }
  return merged
}
