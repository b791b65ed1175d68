/**
 * The configured upstreams: one adapter and one concurrency gate per provider, shared by the
 * dispatcher and the live endpoints. `send` waits for a slot of the offering's provider, hands
 * the adapter the request (the adapter translates it for its upstream), and pauses the provider
 * when it answers 429. Falling back from one offering to the next is send-with-fallback.ts.
 * A provider with `adaptive_concurrency` gets an adaptive gate in front of its usual one
 * (adaptive-gate.ts); a batch line every replica answers busy waits here, no attempt counted.
 */
import type { Offering } from '../catalog/catalog-file.ts'
import { speaksApi } from '../catalog/speaks-api.ts'
import { createProvider } from '../../providers/index.ts'
import { createHttpClient } from '../../providers/http-client.ts'
import type {
  Endpoint,
  FineTune,
  PassThrough,
  Outcome,
  ProviderAdapter,
  StreamOutcome,
  UpstreamError,
  UpstreamRequest,
} from '../../providers/types.ts'
import type { Config } from '../config.ts'
import { noTelemetry, type Telemetry, type UpstreamResult } from '../telemetry/telemetry.ts'
import { createLogger, type Logger } from '../telemetry/logger.ts'
import type { ReplicaHealthListener } from '../../providers/pool.ts'
import { createAdaptiveGate } from './adaptive-gate.ts'
import { createProviderGate, type ProviderGate } from './provider-gate.ts'
import { createSlotHandOver, type SlotHandOver } from './slot-hand-over.ts'
import type { QueuePlace } from './wait-queue.ts'
import type { ModelLimits } from '../../providers/types.ts'

/** Which batch line a call is for: its span carries these and links to the batch. */
export interface LineCall {
  batchId: string
  lineNo: number
  attempt: number
}

/** A request in a provider's own API, and which API (UpstreamRequest.passThrough). */
export interface NativeRequest {
  api: PassThrough
  body: Record<string, unknown>
  /** The caller's `anthropic-beta` header, sent on with a request passed through to Anthropic. */
  anthropicBeta?: string
  /**
   * A live Responses call: to an offering whose model reasons (`encrypted_reasoning`), it asks for
   * the reasoning as encrypted content, since nothing is stored upstream (store: false): the
   * caller can then send the reasoning items back with its next turn, as OpenAI requires of a
   * reasoning model's stateless conversation.
   */
  reasoningBack?: boolean
}

/** One call to one offering. */
export interface SendOptions {
  endpoint: Endpoint
  /** OpenAI-shaped, as the gateway validated it; the adapter makes it the upstream's. */
  body: Record<string, unknown>
  offering: Offering
  /** The model's limits: an upstream that requires an output limit is sent one within them. */
  modelLimits: ModelLimits
  signal?: AbortSignal
  /**
   * Ends the wait for the provider's slot only (a stopped batch: dispatch/stopped-batches.ts):
   * the call is then not made and send resolves null. Unset: `signal` ends the wait.
   */
  waitSignal?: AbortSignal
  /** The fine-tune the request is for: sent with its name as the model (docs/open-models.md). */
  fineTune?: FineTune
  /**
   * The request in a provider's own API (the Responses API, Anthropic's Messages): sent as it came
   * to an offering that speaks it (catalog/speaks-api.ts), `body` to the others.
   */
  passThrough?: NativeRequest
  /**
   * Asked once a slot is free, right before the call: false (the line's batch was cancelled or
   * reached its deadline while it waited, or the provider became unavailable) skips the call,
   * and send resolves null.
   */
  proceed?: () => boolean
  line?: LineCall
  /**
   * A batch line's place where it queues at a full provider (wait-queue.ts): its account's lines
   * due earlier go first. Unset: a live call, before any line.
   */
  place?: QueuePlace
  /**
   * How long a call every replica answers busy (503, a full queue) may wait and be sent again
   * before the busy answer is returned; unset or 0: returned at once. Batch lines wait (docs/routing.md:
   * busy is not an attempt), live calls fall back at once.
   */
  busyPatienceMs?: number
  /**
   * Told each time a busy answer makes the call wait to be sent again at `retryAtMs`: a batch's
   * reason to wait (src/dispatch/dispatcher.ts). One function for every call, handed the call's
   * options, so a line costs no closure of its own.
   */
  onBusy?: (options: SendOptions, error: UpstreamError, retryAtMs: number) => void
}

export interface Upstreams {
  send(options: SendOptions): Promise<Outcome | null>
  /** A streamed chat call; `done` gives the slot back once the stream is over (called already when it failed to open). */
  stream(
    options: Omit<SendOptions, 'proceed' | 'line'>,
  ): Promise<{ outcome: StreamOutcome; done: () => void }>
  gate(provider: string): ProviderGate
  /**
   * Whether the provider can take a batch line now (docs/routing.md): false while every replica is out
   * and unreachable (refused connections, failed health probes) or it is paused after a 429. Live
   * calls do not ask: they keep trying the replica with the fewest in flight.
   */
  available(provider: string, nowMs: number): boolean
  /** Every replica is out and unreachable: a call now would not be served (part of `available`). */
  unreachable(provider: string): boolean
  /** Until when (Unix ms) a 429 paused the provider: 0 when it is not paused now. */
  pausedUntil(provider: string, nowMs: number): number
  /** Total concurrency across providers that can be called. */
  capacity(): number
  health(): Record<string, ProviderHealth>
  /** Each provider's replicas: how many there are and how many are healthy (/metrics). */
  replicaCounts(): Record<string, { healthy: number; total: number }>
  close(): Promise<void>
}

/** How a provider is doing, for health and tests. */
export interface ProviderHealth {
  in_flight: number
  limit: number
  unhealthy_replicas: string[]
  /** Adaptive concurrency only: each replica's working point, by base URL. */
  working_points?: Record<string, number>
}

/** Pause after a 429 without Retry-After. */
const DEFAULT_PAUSE_MS = 1_000
/** Waiting on a busy provider: 50 ms doubling to 2 s (jittered), at most this many rounds per call. */
const BUSY_BASE_DELAY_MS = 50
const BUSY_MAX_DELAY_MS = 2_000
const MAX_BUSY_ROUNDS = 100_000

/** How long a provider that answered 429 is paused: what it asked for, else a second. */
export const pauseMsAfter = (error: Pick<UpstreamError, 'retryAfterMs'>) =>
  error.retryAfterMs ?? DEFAULT_PAUSE_MS

/** Makes a provider's gate: in-process by default, fleet-wide with Redis (fleet-gate.ts). */
export type GateFactory = (provider: string, limit: number) => ProviderGate

/** The providers' adapters and gates, by provider name: the state every step below shares. */
interface Providers {
  adapters: Map<string, ProviderAdapter>
  gates: Map<string, ProviderGate>
  handOvers: Map<string, SlotHandOver>
  /** Provider → until when (Unix ms) a 429 paused it. */
  pausedUntil: Map<string, number>
  /** The catalog's providers: which API each takes as it came (catalog/speaks-api.ts). */
  configs: Config['catalog']['providers']
  telemetry: Telemetry
  /** Where a replica taken out or back is said (the operator's only sign of a dead upstream). */
  logger: Logger
}

export function createUpstreams(
  config: Pick<Config, 'catalog' | 'providerKeys'>,
  telemetry: Telemetry = noTelemetry,
  makeGate: GateFactory = (_, limit) => createProviderGate(limit),
  logger: Logger = createLogger('silent'),
): Upstreams {
  const providers: Providers = {
    adapters: new Map(),
    gates: new Map(),
    handOvers: new Map(),
    pausedUntil: new Map(),
    configs: config.catalog.providers,
    telemetry,
    logger,
  }
  for (const [name, provider] of Object.entries(config.catalog.providers)) {
    if (provider.api_key_env && !config.providerKeys[name]) continue // not usable; never called
    addProvider(providers, name, provider, { apiKey: config.providerKeys[name] ?? null, makeGate })
  }
  const { adapters, gates, pausedUntil } = providers

  return {
    send: (options) => send(providers, options),
    stream: (options) => stream(providers, options),
    gate: (provider) => lookup(providers, provider).gate,
    available(provider, nowMs) {
      const adapter = adapters.get(provider)
      if (!adapter) return false
      if ((pausedUntil.get(provider) ?? 0) > nowMs) return false
      return !adapter.unreachable()
    },
    unreachable: (provider) => adapters.get(provider)?.unreachable() ?? true,
    pausedUntil(provider, nowMs) {
      const until = pausedUntil.get(provider) ?? 0
      return until > nowMs ? until : 0
    },
    capacity: () => [...gates.values()].reduce((sum, gate) => sum + gate.limit, 0),
    health: () => health(providers),
    replicaCounts() {
      const counts: Record<string, { healthy: number; total: number }> = {}
      for (const [name, adapter] of adapters) {
        const base = providers.configs[name]!.base_url
        const total = Array.isArray(base) ? base.length : 1
        counts[name] = { healthy: total - adapter.unhealthyReplicas().length, total }
      }
      return counts
    },
    async close() {
      await Promise.all([...adapters.values()].map((adapter) => adapter.close()))
    },
  }
}

/** One provider of the catalog: its adapter, behind its gate (adaptive when it says so). */
function addProvider(
  providers: Providers,
  name: string,
  provider: Config['catalog']['providers'][string],
  { apiKey, makeGate }: { apiKey: string | null; makeGate: GateFactory },
) {
  const base = makeGate(name, provider.max_concurrency)
  // Adaptive: the replicas' working points bound the provider below max_concurrency.
  const adaptiveGate = provider.adaptive_concurrency
    ? createAdaptiveGate(base, () => adapter.workingLimit())
    : null
  const gate = adaptiveGate ?? base
  const handOver = createSlotHandOver(gate)
  const baseUrls = Array.isArray(provider.base_url) ? provider.base_url : [provider.base_url]
  const adapter = createProvider({
    name,
    kind: provider.kind,
    baseUrls,
    apiKey,
    timeoutMs: provider.timeout_s * 1000,
    maxLoras: provider.lora ? provider.max_loras : undefined,
    serviceTier: provider.service_tier,
    // OpenAI's own API is the provider that speaks its Responses API (the shipped catalog's).
    developerAsSystem: provider.kind === 'openai' && provider.responses_api !== true,
    // Enough keep-alive connections per replica for the provider's whole concurrency.
    connections: provider.max_concurrency,
    createClient: (baseUrl, options) =>
      createHttpClient(baseUrl, { ...options, onAnswered: handOver.answered }),
    adaptive: adaptiveGate
      ? { maxConcurrency: provider.max_concurrency, onChange: () => adaptiveGate.serve() }
      : undefined,
    onReplicaHealth: (change) => logReplicaHealth(providers.logger, name, change),
  })
  providers.adapters.set(name, adapter)
  providers.gates.set(name, gate)
  providers.handOvers.set(name, handOver)
}

/**
 * A replica out or back, at warn and info: lines waiting `provider_unavailable` tell their users
 * to ask the operator, who sees it here (and in /metrics' multigrid_upstream_replicas_healthy).
 */
function logReplicaHealth(
  logger: Logger,
  provider: string,
  change: Parameters<ReplicaHealthListener>[0],
) {
  const fields = {
    provider,
    replica: replicaOrigin(change.baseUrl),
    reason: change.reason,
    healthy_replicas: change.healthyReplicas,
    replicas: change.replicas,
  }
  if (change.healthy) logger.info('upstream.replica_up', fields)
  else logger.warn('upstream.replica_down', fields)
}

/** A base URL's scheme, host and path, never credentials or a query that may hold a key. */
function replicaOrigin(baseUrl: string): string {
  const url = URL.parse(baseUrl)
  return url ? `${url.protocol}//${url.host}${url.pathname}` : '(not a URL)'
}

// The one place a 429 pauses a provider: nothing new goes to it until it said it may.
function pauseOn429(
  { pausedUntil }: Providers,
  provider: string,
  gate: ProviderGate,
  outcome: Outcome | StreamOutcome,
) {
  if (!outcome.ok && outcome.error.kind === 'rate_limited') {
    const until = Date.now() + pauseMsAfter(outcome.error)
    gate.pause(until)
    if (until > (pausedUntil.get(provider) ?? 0)) pausedUntil.set(provider, until)
  }
}

function lookup(providers: Providers, provider: string) {
  const adapter = providers.adapters.get(provider)
  const gate = providers.gates.get(provider)
  const handOver = providers.handOvers.get(provider)
  if (!adapter || !gate || !handOver) throw new Error(`provider ${provider} is not configured`)
  return { adapter, gate, handOver }
}

function requestFor(
  providers: Providers,
  {
    endpoint,
    body,
    offering,
    modelLimits,
    signal,
    fineTune,
    passThrough,
  }: Omit<SendOptions, 'proceed' | 'line'>,
): UpstreamRequest {
  // In the provider's own API where it speaks it; the chat body everywhere else.
  const native =
    passThrough && speaksApi(providers.configs[offering.provider], passThrough.api)
      ? passThrough
      : undefined
  return {
    endpoint,
    body: native ? nativeBody(native, offering) : body,
    // A fine-tune is the server's model by its own name, loaded beside its base.
    model: fineTune ? fineTune.name : offering.upstream_model,
    maxTokensParam: offering.max_tokens_param,
    modelLimits,
    signal,
    fineTune,
    passThrough: native?.api,
    ...(native?.anthropicBeta !== undefined && { anthropicBeta: native.anthropicBeta }),
    // A flex offering's own timeout (docs/pricing.md): several share the lane's derived provider.
    ...(offering.timeout_s !== undefined && { timeoutMs: offering.timeout_s * 1000 }),
  }
}

/** A passed-through body for `offering` (NativeRequest.reasoningBack). */
function nativeBody(native: NativeRequest, offering: Offering): Record<string, unknown> {
  if (!native.reasoningBack || !offering.encrypted_reasoning) return native.body
  const asked = Array.isArray(native.body.include) ? (native.body.include as unknown[]) : []
  if (asked.includes(ENCRYPTED_REASONING)) return native.body
  return { ...native.body, include: [...asked, ENCRYPTED_REASONING] }
}

const ENCRYPTED_REASONING = 'reasoning.encrypted_content'

/**
 * Every replica answered busy (503, a full queue): the call waits and is sent again, with no
 * attempt counted, while the patience lasts and `proceed` agrees (the batch's deadline, a
 * cancel). With adaptive concurrency the working points fell meanwhile, so the gate holds it
 * until a call ends; without, the backoff paces it. Bounded in rounds too.
 */
async function waitWhileBusy(
  providers: Providers,
  options: SendOptions,
  first: Outcome,
): Promise<Outcome | null> {
  const until = Date.now() + options.busyPatienceMs!
  const again = { ...options, busyPatienceMs: 0 }
  let outcome: Outcome | null = first
  for (let round = 0; round < MAX_BUSY_ROUNDS; round++) {
    if (outcome === null || outcome.ok || outcome.error.kind !== 'busy') return outcome
    const backoff = Math.min(BUSY_MAX_DELAY_MS, BUSY_BASE_DELAY_MS * 2 ** Math.min(round, 6))
    const delay = Math.max(outcome.error.retryAfterMs ?? 0, backoff * (0.5 + Math.random() / 2))
    if (Date.now() + delay > until || options.signal?.aborted) return outcome
    options.onBusy?.(options, outcome.error, Date.now() + delay)
    // A stopped batch's line stops waiting too; the send below then makes no call.
    await sleep(delay, options.waitSignal ?? options.signal)
    outcome = await send(providers, again)
  }
  return outcome
}

/** One call within the provider's gate; null when `proceed` said no. */
async function send(providers: Providers, options: SendOptions): Promise<Outcome | null> {
  const { telemetry } = providers
  const { offering, endpoint } = options
  const { adapter, gate, handOver } = lookup(providers, offering.provider)
  const call = {
    provider: offering.provider,
    model: offering.upstream_model,
    endpoint,
    ...options.line,
  }
  // Sent the moment the slot is taken, often from inside the answer that handed it on
  // (slot-hand-over.ts), so that it takes that answer's connection at once.
  const sent: { outcome?: Promise<Outcome>; error?: unknown } = {}
  const start = () => {
    try {
      // Given up before a slot was taken, as when it waited (a live caller gone before its
      // fallback call): not sent. The free-slot path does not look at the signal itself.
      if (options.waitSignal?.aborted) return
      if (options.proceed && !options.proceed()) return
      sent.outcome = telemetry.upstream(
        call,
        () => adapter.send(requestFor(providers, options)),
        describeOutcome,
      )
      handOver.sent()
    } catch (error) {
      sent.error = error
    }
  }
  try {
    await gate.acquire(options.waitSignal ?? options.signal, start, options.place)
  } catch (error) {
    // The wait alone was given up: not sent, as when `proceed` says no.
    if (options.waitSignal?.aborted && !options.signal?.aborted) return null
    throw error
  }
  if (!sent.outcome) {
    gate.release()
    if (sent.error !== undefined) throw sent.error
    return null
  }
  let outcome: Outcome
  try {
    outcome = await sent.outcome
    pauseOn429(providers, offering.provider, gate, outcome)
  } finally {
    handOver.ended()
  }
  if (!outcome.ok && outcome.error.kind === 'busy' && options.busyPatienceMs) {
    return waitWhileBusy(providers, options, outcome)
  }
  return outcome
}

/** A streamed call: the slot is held until the caller's `done`, or given back on a refusal. */
async function stream(providers: Providers, options: Parameters<Upstreams['stream']>[0]) {
  const { telemetry } = providers
  const { offering, endpoint } = options
  const { adapter, gate } = lookup(providers, offering.provider)
  await gate.acquire(options.signal)
  const done = releaseOnce(gate)
  try {
    const started = performance.now()
    const call = { provider: offering.provider, model: offering.upstream_model, endpoint }
    const outcome = await telemetry.upstream(
      call,
      () => adapter.stream(requestFor(providers, options)),
      (opened) =>
        opened.ok
          ? Promise.all([opened.usage, opened.broken]).then(([usage, broken]) => ({
              status: 200,
              latencyMs: performance.now() - started,
              // A stream that broke after it opened is an error of its provider's all the same.
              errorKind: broken?.kind ?? null,
              usage,
            }))
          : describeOutcome(opened),
    )
    pauseOn429(providers, offering.provider, gate, outcome)
    if (!outcome.ok) done()
    return { outcome, done }
  } catch (error) {
    done()
    throw error
  }
}

function health({ adapters, gates }: Providers) {
  const result: ReturnType<Upstreams['health']> = {}
  for (const [name, adapter] of adapters) {
    const gate = gates.get(name)!
    result[name] = {
      in_flight: gate.inFlight,
      limit: gate.limit,
      unhealthy_replicas: adapter.unhealthyReplicas(),
    }
    const points = adapter.workingPoints()
    if (Object.keys(points).length > 0) result[name].working_points = points
  }
  return result
}

/** Gives the slot back the first time it is called; later calls do nothing. */
function releaseOnce(gate: ProviderGate): () => void {
  let released = false
  return () => {
    if (released) return
    released = true
    gate.release()
  }
}

/** An outcome as its span and metrics see it. */
function describeOutcome(outcome: Outcome | Extract<StreamOutcome, { ok: false }>): UpstreamResult {
  if (outcome.ok)
    return {
      status: outcome.status,
      latencyMs: outcome.latencyMs,
      errorKind: null,
      usage: outcome.usage,
    }
  return {
    status: outcome.error.status,
    latencyMs: outcome.latencyMs,
    errorKind: outcome.error.kind,
    callerAborted: outcome.error.callerAborted === true,
    usage: null,
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal?.removeEventListener('abort', done)
      resolve()
    }
    signal?.addEventListener('abort', done, { once: true })
  })
}
