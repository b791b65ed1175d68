/**
 * The provider spec: what the dispatcher and the live endpoints hand an adapter, and what an
 * adapter hands back. Adapters translate one request and make one HTTP call; they never retry,
 * price, rate-limit or persist. Failures are returned as values, classified here at the edge so
 * the dispatcher's single retry policy can decide what to do with them.
 *
 * Nothing under providers/ imports from src/.
 */
import type { HttpClientFactory } from './http-client.ts'
import type { AdaptivePoolOptions, ReplicaHealthListener } from './pool.ts'

/** The two names of the output-token limit in OpenAI's API. */
export type MaxTokensParam = 'max_tokens' | 'max_completion_tokens'

/** The two endpoints a batch line or a live call can target. */
export type Endpoint = 'chat' | 'embeddings'

/**
 * A fine-tune (a LoRA adapter) a request is for (docs/open-models.md): the pool loads it on a replica before
 * the request goes there, and the request names it as its model.
 */
export interface FineTune {
  /** What the server calls it once loaded (vLLM's lora_name): the gateway's `ft:` id. */
  name: string
  /** Where the server loads it from (vLLM's lora_path). */
  path: string
}

/**
 * One request for one offering. The adapter makes the upstream's body of it (prepare-for-offering.ts
 * first, then its own translation); the gateway hands it over as it validated it.
 */
/** A model's limits as the catalog gives them (`max_output_tokens`, `context_tokens`). */
export interface ModelLimits {
  outputTokens: number
  contextTokens: number
}

export interface UpstreamRequest {
  endpoint: Endpoint
  /** OpenAI-shaped, as the gateway validated it: its routing object and its own model id included. */
  body: Record<string, unknown>
  /** The upstream's id of the model (the offering's `upstream_model`). */
  model: string
  /**
   * The name this upstream wants the output-token limit under (OpenAI's reasoning models take only
   * `max_completion_tokens`); unset, the limit keeps the name it came under.
   */
  maxTokensParam?: MaxTokensParam
  /**
   * The model's limits, for an upstream that requires an output limit where the body sets none
   * (Anthropic): it is sent the model's, within the context window (convert-to-anthropic-messages.ts).
   * Unset: 4096.
   */
  modelLimits?: ModelLimits
  /** Aborts the call (cancel, shutdown). The per-provider timeout is applied by the adapter. */
  signal?: AbortSignal
  /** This call's timeout in place of the provider's (an offering's own, on the flex lane). */
  timeoutMs?: number
  /** The fine-tune to serve it with; `model` is then its name. Only providers with maxLoras take one. */
  fineTune?: FineTune
  /**
   * The body is in the provider's own API, passed through (docs/openai-facade.md) and answered as the provider
   * answered it (the object, or its stream events): `responses` — a Responses API request to an
   * OpenAI provider with `responses_api`; `messages` — a Messages API request to Anthropic;
   * `count_tokens` — a Messages body whose prompt Anthropic counts (`{"input_tokens"}`, no usage).
   */
  passThrough?: PassThrough
  /**
   * Anthropic's beta features the caller asked for (its `anthropic-beta` header), sent on with a
   * request passed through to Anthropic, whose fields may need them.
   */
  anthropicBeta?: string
}

/** The provider APIs a request can be passed through in (UpstreamRequest.passThrough). */
export type PassThrough = 'responses' | 'messages' | 'count_tokens'

/**
 * Token usage in the gateway's terms, mapped from whatever the upstream reported (docs/pricing.md).
 * `input_tokens` counts every prompt token; the cache classes are parts of it (absent: none).
 * Uncached input = input − cached − written (5-minute and 1-hour).
 */
export interface Usage {
  input_tokens: number
  output_tokens: number
  /** Prompt tokens read from the provider's prompt cache. */
  cached_input_tokens?: number
  /** Prompt tokens written to the cache (OpenAI's writes; Anthropic's 5-minute ones). */
  cache_write_tokens?: number
  /** Prompt tokens written to Anthropic's 1-hour cache. */
  cache_write_1h_tokens?: number
}

/** How an upstream failure is classified. `retryable` is decided by the adapter from the kind. */
export type UpstreamErrorKind =
  | 'rate_limited' // 429
  | 'busy' // 503 (529 from Anthropic): at capacity, e.g. a vLLM replica whose queue is full
  | 'server_error' // 5xx
  | 'timeout' // no complete answer within the provider's timeout
  | 'connection' // refused, reset, closed mid-body
  | 'malformed_response' // 2xx whose body is not the JSON the endpoint promises
  | 'invalid_request' // other 4xx: the request itself is wrong; never retried
  | 'context_length_exceeded' // a 4xx that says the prompt is too long
  | 'auth' // 401/403 from upstream: the gateway's provider key is wrong

export interface UpstreamError {
  kind: UpstreamErrorKind
  retryable: boolean
  /** Upstream HTTP status, or null when no response arrived. */
  status: number | null
  /** From `retry-after-ms` or `retry-after` (seconds or HTTP date), when the upstream sent one. */
  retryAfterMs: number | null
  /** A short, key-free description for logs and line errors. */
  message: string
  /** The upstream's parsed error body for 4xx answers, so users see what the provider said. */
  body: unknown
  /** The caller gave up on it (a client gone, a shutdown): no fault of the provider's. */
  callerAborted?: true
}

/** Result of one non-streaming call. */
export type Outcome =
  | {
      ok: true
      status: number
      /** The endpoint's normal OpenAI-shaped response (chat.completion or list of embeddings). */
      body: Record<string, unknown>
      /** `body` as the upstream sent it, when the adapter passed it through unchanged. */
      text?: string
      /** null when the upstream answered without usage. */
      usage: Usage | null
      latencyMs: number
    }
  | { ok: false; error: UpstreamError; latencyMs: number }

/** Result of opening a streaming chat call: OpenAI `chat.completion.chunk` objects as they arrive. */
export type StreamOutcome =
  | {
      ok: true
      /**
       * Each item is one chunk object, already in OpenAI's shape, ending with a usage chunk
       * (`choices: []`) when the upstream reported usage. Ends when the upstream ends; a failure
       * after the stream opened is thrown as UpstreamStreamError (providers/index.ts). Iterate
       * to the end or call return(); the provider timeout frees the connection otherwise.
       */
      chunks: AsyncIterable<Record<string, unknown>>
      /** Resolves after `chunks` ends, with the usage the upstream reported (null if none). */
      usage: Promise<Usage | null>
      /**
       * Resolves with `usage`: the failure that broke the stream after it opened, or null when
       * it ended (or the caller stopped reading). What the upstream metrics count it as.
       */
      broken: Promise<UpstreamError | null>
    }
  | { ok: false; error: UpstreamError; latencyMs: number }

/** One upstream provider (possibly a pool of replicas) behind one small interface. */
export interface ProviderAdapter {
  readonly name: string
  send(request: UpstreamRequest): Promise<Outcome>
  stream(request: UpstreamRequest): Promise<StreamOutcome>
  /** Replicas currently taken out of rotation, for health and metrics. */
  unhealthyReplicas(): string[]
  /**
   * Adaptive concurrency: the most calls the provider should have in flight now (the sum of its
   * replicas' working points); Infinity without it.
   */
  workingLimit(): number
  /** Adaptive concurrency: each replica's working point, by base URL; empty without it. */
  workingPoints(): Record<string, number>
  /**
   * Every replica is out and cannot be reached (it refused connections or failed its health
   * probe since): no call can be served now. Replicas out for answering 5xx are not unreachable.
   */
  unreachable(): boolean
  close(): Promise<void>
}

/** What an adapter factory needs; resolved from the catalog and the environment by the caller. */
export interface ProviderOptions {
  name: string
  kind: 'openai' | 'anthropic'
  /** One URL, or several forming a pool of replicas. */
  baseUrls: string[]
  /** The secret, already read from the environment; never logged. */
  apiKey: string | null
  timeoutMs: number
  /** Upper bound on connections per replica (sized by the caller from max_concurrency). */
  connections: number
  /**
   * Set for a pool whose servers load fine-tunes (LoRA adapters) at runtime (vLLM with runtime
   * LoRA updating):
   * how many one replica holds at once (its --max-loras).
   */
  maxLoras?: number
  /** How long an unhealthy replica stays out before it is probed. Default 5 s. */
  probeIntervalMs?: number
  /** Makes each replica's HTTP client; createHttpClient by default (the caller may add its hooks). */
  createClient?: HttpClientFactory
  /** Adaptive concurrency (`adaptive_concurrency: true`): each replica finds its working point. */
  adaptive?: AdaptivePoolOptions
  /** Kind openai: every chat call carries `service_tier` (OpenAI's flex lane, docs/pricing.md). */
  serviceTier?: 'flex'
  /**
   * Kind openai, a server that is not OpenAI's own: a chat call's `developer` messages go as
   * `system` ones, the role every chat server knows (Qwen's chat template on vLLM refuses the
   * other, and some templates drop it without a word).
   */
  developerAsSystem?: boolean
  /** Told when one of its replicas is taken out or comes back (pool.ts). */
  onReplicaHealth?: ReplicaHealthListener
}
