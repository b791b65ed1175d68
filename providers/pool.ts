/**
 * Replicas of one provider (docs/configuration.md): each call goes to the healthy replica with the fewest in
 * flight. A replica that refuses connections, or fails three calls in a row (5xx, timeout,
 * connection lost mid-call), is taken out and probed with GET {base}{probePath} every
 * probeIntervalMs until it answers anything below 500.
 *
 * When every replica is out, calls still go to the one with the fewest in flight rather than
 * failing unsent: "out" only means "prefer the others". A lone replica (api.openai.com) is
 * then never blocked by its own health mark, a burst of 5xx stays the retry policy's to pace,
 * and a call that succeeds on a replica that was out brings it back at once.
 *
 * With adaptive concurrency each replica also has a working point (adaptive-limit.ts) fed by its
 * calls' latencies, busy answers, timeouts and vLLM load reports (the answer's
 * `endpoint-load-metrics` header, and its /metrics queue gauge read every second): calls go to the
 * healthy replica with the most room under its working point, and the sum of the working points
 * is what the provider's gate lets through (src/upstream/adaptive-gate.ts).
 */
import { createAdaptiveLimit, type AdaptiveLimit } from './adaptive-limit.ts'
import { createHttpClient, type HttpClient, type HttpClientFactory } from './http-client.ts'
import { createDeadline } from './deadline.ts'
import { waitingFromMetrics } from './load-report.ts'

export interface Replica {
  readonly baseUrl: string
  readonly client: HttpClient
  inFlight: number
  healthy: boolean
  /** Out because it refused a connection or failed a probe, not merely for failing calls. */
  unreachable: boolean
  consecutiveFailures: number
  /** Adaptive concurrency only: this replica's working point. */
  readonly limiter: AdaptiveLimit | null
  /** When it was taken out (Date.now()), while it is out; null while healthy. */
  outSince: number | null
}

/** How a call on a replica ended, as far as the replica's health is concerned. */
export type CallHealth =
  | 'ok' // answered (2xx, or a 4xx that is the request's fault)
  | 'failure' // 5xx, timeout, connection lost mid-call: three in a row take it out
  | 'down' // no connection could be made: out at once
  | 'neutral' // says nothing about the replica (429, a full queue's 503, the caller aborted)

/** What a call showed about the replica's load, for adaptive concurrency. */
export type CallLoad =
  | { latencyMs: number; waiting: number | null } // answered, with the load report if it had one
  | 'congested' // busy (503 queue full, 429) or timed out

export interface ReplicaPool {
  /** How many replicas there are, healthy or not. */
  readonly size: number
  /** Whether each replica finds its own working point (adaptive concurrency). */
  readonly adaptive: boolean
  /** The replica to use, its in-flight count already raised. */
  acquire(): Replica
  /**
   * Another replica for a call that `tried` answered busy: a healthy one not tried yet (with room
   * under its working point, when adaptive), its in-flight count raised; null when none.
   */
  another(tried: readonly Replica[]): Replica | null
  /** Ends one acquire(); call exactly once per acquire. `load` feeds adaptive concurrency. */
  release(replica: Replica, health: CallHealth, load?: CallLoad): void
  /**
   * Adaptive: the sum of the healthy replicas' working points (of all of them when none is
   * healthy), the most the provider should have in flight now. Otherwise Infinity.
   */
  workingLimit(): number
  /** Adaptive: each replica's working point, by base URL. */
  workingPoints(): Record<string, number>
  /** Every replica, healthy or not, in the order of the base URLs. */
  readonly replicas: readonly Replica[]
  /** Raises this replica's in-flight count: a call chosen for it by its caller (fine-tune-residency.ts). */
  take(replica: Replica): void
  unhealthy(): string[]
  /** Every replica is out and unreachable (see Replica.unreachable): the provider is down. */
  unreachable(): boolean
  close(): Promise<void>
}

export interface ReplicaPoolOptions {
  baseUrls: string[]
  connections: number
  timeoutMs: number
  /** Default 5,000. */
  probeIntervalMs?: number
  /** Appended to each base URL for the health probe: '/models'. */
  probePath: string
  /** Sent with the probe; a 401 still proves the replica is up. */
  probeHeaders: Record<string, string>
  /** createHttpClient by default. */
  createClient?: HttpClientFactory
  /** Adaptive concurrency (docs/routing.md); absent: the pool only balances and checks health. */
  adaptive?: AdaptivePoolOptions
  /** Told when a replica is taken out or comes back (the operator's log line), once per change. */
  onHealthChange?: ReplicaHealthListener
}

/** A replica taken out (`healthy` false) or back, why, and how many of the pool are healthy now. */
export type ReplicaHealthListener = (change: {
  baseUrl: string
  healthy: boolean
  reason: string
  healthyReplicas: number
  replicas: number
}) => void

export interface AdaptivePoolOptions {
  /** The provider's max_concurrency: the upper bound of each replica's working point. */
  maxConcurrency: number
  /** How often each replica's GET /metrics is read for vLLM's queue gauge; default 1,000 ms. */
  metricsIntervalMs?: number
  /** Told whenever the working limit may have grown (the gate then serves its waiters). */
  onChange?: () => void
  now?: () => number
}

// Three, not one: a single 5xx or reset is often one bad request, not a bad replica.
const failuresBeforeOut = 3
const probeTimeoutMs = 5_000
// A replica whose /metrics is not vLLM's (404, no gauge) is asked again only this seldom.
const metricsRetryMs = 60_000

/** What the pool's steps share: its replicas, their probes and whose turn it is. */
interface PoolState {
  options: ReplicaPoolOptions
  replicas: Replica[]
  probes: Map<Replica, Timer>
  closed: boolean
  turn: number
  adaptive: ReplicaPoolOptions['adaptive']
  now: () => number
  createClient: NonNullable<ReplicaPoolOptions['createClient']>
  probeIntervalMs: number
}

export function createReplicaPool(options: ReplicaPoolOptions): ReplicaPool {
  const createClient = options.createClient ?? createHttpClient
  const replicas: Replica[] = options.baseUrls.map((baseUrl) => ({
    baseUrl,
    client: createClient(baseUrl, {
      connections: options.connections,
      connectTimeoutMs: Math.min(options.timeoutMs, 10_000),
    }),
    inFlight: 0,
    healthy: true,
    unreachable: false,
    consecutiveFailures: 0,
    limiter: options.adaptive
      ? createAdaptiveLimit({
          max: options.adaptive.maxConcurrency,
          reportTtlMs: 3 * (options.adaptive.metricsIntervalMs ?? 1_000),
        })
      : null,
    outSince: null,
  }))
  const adaptive = options.adaptive
  const state: PoolState = {
    options,
    replicas,
    probes: new Map(),
    closed: false,
    turn: 0,
    adaptive,
    now: adaptive?.now ?? Date.now,
    createClient,
    probeIntervalMs: options.probeIntervalMs ?? 5_000,
  }
  const metrics = adaptive ? watchMetrics(state) : null

  return {
    size: replicas.length,
    adaptive: adaptive !== undefined,
    replicas,
    take(replica) {
      replica.inFlight++
    },
    acquire: () => acquire(state),
    another: (tried) => another(state, tried),
    release: (replica, health, load) => release(state, replica, health, load),
    workingLimit() {
      if (!adaptive) return Number.POSITIVE_INFINITY
      const healthy = replicas.filter((replica) => replica.healthy)
      const counted = healthy.length > 0 ? healthy : replicas
      return counted.reduce((sum, replica) => sum + replica.limiter!.limit, 0)
    },
    workingPoints() {
      const points: Record<string, number> = {}
      for (const replica of replicas)
        if (replica.limiter) points[replica.baseUrl] = replica.limiter.limit
      return points
    },
    unhealthy: () => replicas.filter((r) => !r.healthy).map((r) => r.baseUrl),
    unreachable: () => replicas.every((r) => !r.healthy && r.unreachable),
    async close() {
      state.closed = true
      for (const timer of state.probes.values()) clearTimeout(timer)
      state.probes.clear()
      await metrics?.close()
      await Promise.all(replicas.map((replica) => replica.client.close()))
    },
  }
}

function scheduleProbe(state: PoolState, replica: Replica): void {
  if (state.closed || state.probes.has(replica)) return
  const timer = setTimeout(() => void probe(state, replica), state.probeIntervalMs)
  // A pool waiting to probe must not keep the process alive on its own.
  timer.unref?.()
  state.probes.set(replica, timer)
}

async function probe(state: PoolState, replica: Replica): Promise<void> {
  const { options } = state
  state.probes.delete(replica)
  if (state.closed) return
  const deadline = createDeadline(Math.min(options.timeoutMs, probeTimeoutMs))
  let up = false
  try {
    const response = await replica.client.request({
      method: 'GET',
      path: options.probePath,
      headers: options.probeHeaders,
      signal: deadline,
    })
    response.discard()
    up = response.status < 500
  } catch {
    up = false
  } finally {
    deadline.done()
  }
  if (up) bringBack(state, replica)
  else {
    replica.unreachable = true
    scheduleProbe(state, replica)
  }
}

function bringBack(state: PoolState, replica: Replica): void {
  const wasOut = !replica.healthy
  replica.healthy = true
  replica.unreachable = false
  replica.outSince = null
  replica.consecutiveFailures = 0
  const timer = state.probes.get(replica)
  if (timer !== undefined) clearTimeout(timer)
  state.probes.delete(replica)
  // Its working point counts again: the provider's gate may serve more.
  state.adaptive?.onChange?.()
  if (wasOut) tellHealth(state, replica, 'it answered again')
}

function takeOut(state: PoolState, replica: Replica, reason: string): void {
  const wasIn = replica.healthy
  replica.healthy = false
  replica.outSince = Date.now()
  scheduleProbe(state, replica)
  if (wasIn) tellHealth(state, replica, reason)
}

function tellHealth(state: PoolState, replica: Replica, reason: string): void {
  state.options.onHealthChange?.({
    baseUrl: replica.baseUrl,
    healthy: replica.healthy,
    reason,
    healthyReplicas: state.replicas.filter((r) => r.healthy).length,
    replicas: state.replicas.length,
  })
}

/** Adaptive: the healthy replica (any, when none is) with the most room under its working point. */
function roomiest(state: PoolState, tried: readonly Replica[] | null): Replica | null {
  const { replicas } = state
  let chosen: Replica | null = null
  let best = -Infinity
  for (let i = 0; i < replicas.length; i++) {
    const replica = replicas[(state.turn + i) % replicas.length]
    if (tried?.includes(replica)) continue
    const room = replica.limiter!.limit - replica.inFlight
    const score = replica.healthy ? room : room - 1e9
    if (score > best) {
      best = score
      chosen = replica
    }
  }
  state.turn = (state.turn + 1) % replicas.length
  return chosen
}

function feed(state: PoolState, replica: Replica, load: CallLoad): void {
  const limiter = replica.limiter!
  const before = limiter.limit
  const at = state.now()
  if (load === 'congested') limiter.congested(at)
  else {
    if (load.waiting !== null) limiter.reported(load.waiting, at)
    limiter.answered(load.latencyMs, replica.inFlight + 1, at)
  }
  if (limiter.limit > before) state.adaptive!.onChange?.()
}

function acquire(state: PoolState): Replica {
  const { replicas } = state
  if (state.adaptive) {
    const chosen = roomiest(state, null)!
    chosen.inFlight++
    return chosen
  }
  let chosen = replicas[state.turn]
  // Start at a rotating index so ties spread across replicas instead of piling on the first.
  state.turn = (state.turn + 1) % replicas.length
  for (let i = 0; i < replicas.length; i++) {
    const replica = replicas[(state.turn + i) % replicas.length]
    const better =
      replica.healthy !== chosen.healthy ? replica.healthy : replica.inFlight < chosen.inFlight
    if (better) chosen = replica
  }
  chosen.inFlight++
  return chosen
}

function another(state: PoolState, tried: readonly Replica[]): Replica | null {
  let chosen: Replica | null = null
  if (state.adaptive) {
    chosen = roomiest(state, tried)
    if (chosen && (!chosen.healthy || chosen.limiter!.limit <= chosen.inFlight)) chosen = null
  } else {
    for (const replica of state.replicas) {
      if (!replica.healthy || tried.includes(replica)) continue
      if (!chosen || replica.inFlight < chosen.inFlight) chosen = replica
    }
  }
  if (chosen) chosen.inFlight++
  return chosen
}

function release(
  state: PoolState,
  replica: Replica,
  health: Parameters<ReplicaPool['release']>[1],
  load: Parameters<ReplicaPool['release']>[2],
): void {
  replica.inFlight--
  if (load !== undefined && replica.limiter) feed(state, replica, load)
  if (health === 'ok') {
    if (replica.healthy) replica.consecutiveFailures = 0
    else bringBack(state, replica)
  } else if (health === 'down') {
    replica.unreachable = true
    takeOut(state, replica, 'no connection could be made')
  } else if (health === 'failure') {
    replica.consecutiveFailures++
    if (replica.consecutiveFailures >= failuresBeforeOut && replica.healthy)
      takeOut(state, replica, `${failuresBeforeOut} calls in a row failed`)
  }
}

/** Reads each replica's vLLM queue gauge every interval (unref'd: it keeps nothing alive). */
function watchMetrics(state: PoolState) {
  const { options, replicas, createClient, now } = state
  const adaptive = state.adaptive!
  const intervalMs = adaptive.metricsIntervalMs ?? 1_000
  const clients = new Map<Replica, HttpClient>()
  const nextAt = new Map<Replica, number>()
  let polling = false
  const timer = setInterval(() => void poll(), intervalMs)
  timer.unref?.()
  async function poll() {
    if (state.closed || polling) return
    polling = true
    try {
      await Promise.all(replicas.map(read))
    } finally {
      polling = false
    }
  }
  async function read(replica: Replica) {
    if (!replica.healthy || (nextAt.get(replica) ?? 0) > now()) return
    let client = clients.get(replica)
    if (!client) {
      // /metrics sits at the server's root, beside /v1.
      client = createClient(new URL(replica.baseUrl).origin, {
        connections: 1,
        connectTimeoutMs: Math.min(options.timeoutMs, 10_000),
      })
      clients.set(replica, client)
    }
    const deadline = createDeadline(Math.min(intervalMs * 2, probeTimeoutMs))
    let waiting: number | null = null
    try {
      const response = await client.request({
        method: 'GET',
        path: '/metrics',
        headers: options.probeHeaders,
        signal: deadline,
      })
      if (response.status === 200) waiting = waitingFromMetrics(await response.text())
      else response.discard()
    } catch {
      waiting = null
    } finally {
      deadline.done()
    }
    if (waiting === null) nextAt.set(replica, now() + metricsRetryMs)
    else if (!state.closed) {
      const before = replica.limiter!.limit
      replica.limiter!.reported(waiting, now())
      if (replica.limiter!.limit > before) adaptive.onChange?.()
    }
  }
  return {
    async close() {
      clearInterval(timer)
      await Promise.all([...clients.values()].map((client) => client.close()))
    },
  }
}
