/**
 * Replicas of one provider (SPEC §9): each call goes to the healthy replica with the fewest in
 * flight. A replica that refuses connections, or fails three calls in a row (5xx, timeout,
 * connection lost mid-call), is taken out and probed with GET {base}{probePath} every
 * probeIntervalMs until it answers anything below 500.
 *
 * When every replica is out, calls still go to the one with the fewest in flight rather than
 * failing unsent: "out" only means "prefer the others". A lone replica (api.openai.com) is
 * then never blocked by its own health mark, a burst of 5xx stays the retry policy's to pace,
 * and a call that succeeds on a replica that was out brings it back at once.
 */
import { createHttpClient, type HttpClient, type HttpClientFactory } from './http-client.ts'
import { createDeadline } from './deadline.ts'

export interface Replica {
  readonly baseUrl: string
  readonly client: HttpClient
  inFlight: number
  healthy: boolean
  /** Out because it refused a connection or failed a probe, not merely for failing calls. */
  unreachable: boolean
  consecutiveFailures: number
  /** When it was taken out (Date.now()), while it is out; null while healthy. */
  outSince: number | null
}

/** How a call on a replica ended, as far as the replica's health is concerned. */
export type CallHealth =
  | 'ok' // answered (2xx, or a 4xx that is the request's fault)
  | 'failure' // 5xx, timeout, connection lost mid-call: three in a row take it out
  | 'down' // no connection could be made: out at once
  | 'neutral' // says nothing about the replica (429, the caller aborted)

export interface ReplicaPool {
  /** How many replicas there are, healthy or not. */
  readonly size: number
  /** Every replica, healthy or not, in the order of the base URLs. */
  readonly replicas: readonly Replica[]
  /** The replica to use, its in-flight count already raised. */
  acquire(): Replica
  /** Raises this replica's in-flight count: a call chosen for it by its caller (lora-residency.ts). */
  take(replica: Replica): void
  /** Ends one acquire(); call exactly once per acquire. */
  release(replica: Replica, health: CallHealth): void
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
}

// Three, not one: a single 5xx or reset is often one bad request, not a bad replica.
const failuresBeforeOut = 3
const probeTimeoutMs = 5_000

export function createReplicaPool(options: ReplicaPoolOptions): ReplicaPool {
  const probeIntervalMs = options.probeIntervalMs ?? 5_000
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
    outSince: null,
  }))
  const probes = new Map<Replica, Timer>()
  let closed = false
  let turn = 0

  function scheduleProbe(replica: Replica): void {
    if (closed || probes.has(replica)) return
    const timer = setTimeout(() => void probe(replica), probeIntervalMs)
    // A pool waiting to probe must not keep the process alive on its own.
    timer.unref?.()
    probes.set(replica, timer)
  }

  async function probe(replica: Replica): Promise<void> {
    probes.delete(replica)
    if (closed) return
    const deadline = createDeadline(Math.min(options.timeoutMs, probeTimeoutMs))
    let up = false
    try {
      const response = await replica.client.request({
        method: 'GET',
        path: options.probePath,
        headers: options.probeHeaders,
        signal: deadline.signal,
      })
      response.discard()
      up = response.status < 500
    } catch {
      up = false
    } finally {
      deadline.done()
    }
    if (up) bringBack(replica)
    else {
      replica.unreachable = true
      scheduleProbe(replica)
    }
  }

  function bringBack(replica: Replica): void {
    replica.healthy = true
    replica.unreachable = false
    replica.outSince = null
    replica.consecutiveFailures = 0
    const timer = probes.get(replica)
    if (timer !== undefined) clearTimeout(timer)
    probes.delete(replica)
  }

  function takeOut(replica: Replica): void {
    replica.healthy = false
    replica.outSince = Date.now()
    scheduleProbe(replica)
  }

  return {
    size: replicas.length,
    replicas,
    take(replica) {
      replica.inFlight++
    },
    acquire() {
      let chosen = replicas[turn]
      // Start at a rotating index so ties spread across replicas instead of piling on the first.
      turn = (turn + 1) % replicas.length
      for (let i = 0; i < replicas.length; i++) {
        const replica = replicas[(turn + i) % replicas.length]
        const better =
          replica.healthy !== chosen.healthy ? replica.healthy : replica.inFlight < chosen.inFlight
        if (better) chosen = replica
      }
      chosen.inFlight++
      return chosen
    },
    release(replica, health) {
      replica.inFlight--
      if (health === 'ok') {
        if (replica.healthy) replica.consecutiveFailures = 0
        else bringBack(replica)
      } else if (health === 'down') {
        replica.unreachable = true
        takeOut(replica)
      } else if (health === 'failure') {
        replica.consecutiveFailures++
        if (replica.consecutiveFailures >= failuresBeforeOut && replica.healthy) takeOut(replica)
      }
    },
    unhealthy: () => replicas.filter((r) => !r.healthy).map((r) => r.baseUrl),
    unreachable: () => replicas.every((r) => !r.healthy && r.unreachable),
    async close() {
      closed = true
      for (const timer of probes.values()) clearTimeout(timer)
      probes.clear()
      await Promise.all(replicas.map((replica) => replica.client.close()))
    },
  }
}
