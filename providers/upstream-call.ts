/**
 * One upstream call on one replica, shared by every adapter: pick the replica, apply the
 * deadline, classify what went wrong, and tell the pool how the replica did.
 */
import {
  classifyException,
  classifyStatus,
  isConnectFailure,
  isSocketClosed,
  upstreamError,
} from './classify-error.ts'
import { createDeadline, type Deadline } from './deadline.ts'
import type { HttpResponse } from './http-client.ts'
import {
  createFineTuneResidency,
  type FineTuneCalls,
  type FineTuneLease,
  type FineTuneResidency,
} from './fine-tune-residency.ts'
import { LOAD_REPORT_HEADER, waitingFromLoadHeader } from './load-report.ts'
import {
  createReplicaPool,
  type CallHealth,
  type CallLoad,
  type Replica,
  type ReplicaPool,
} from './pool.ts'
import { readSseEvents, type SseEvent } from './read-sse-events.ts'
import type { FineTune, ProviderOptions, UpstreamError } from './types.ts'
import { UpstreamStreamError } from './upstream-stream-error.ts'

export interface CallContext {
  /** Provider name, for messages. */
  name: string
  pool: ReplicaPool
  timeoutMs: number
  apiKey: string | null
  /** Which fine-tunes each replica holds; null for a provider that serves none. */
  residency: FineTuneResidency | null
}

/**
 * The replica pool and call context of one provider, the same for every adapter: what differs
 * is where the replicas are, how one is probed for health, and the headers that authenticate.
 */
export function createCallContext(
  options: ProviderOptions,
  replicas: { baseUrls: string[]; probePath: string; probeHeaders: Record<string, string> },
  /** How this kind of server loads fine-tunes; used when options.maxLoras is set. */
  fineTuneCalls?: FineTuneCalls,
): CallContext {
  const pool = createReplicaPool({
    ...replicas,
    connections: options.connections,
    timeoutMs: options.timeoutMs,
    probeIntervalMs: options.probeIntervalMs,
    createClient: options.createClient,
    adaptive: options.adaptive,
    onHealthChange: options.onReplicaHealth,
  })
  const residency =
    options.maxLoras !== undefined && fineTuneCalls
      ? createFineTuneResidency({ pool, calls: fineTuneCalls }, { maxLoras: options.maxLoras })
      : null
  return {
    name: options.name,
    pool,
    timeoutMs: options.timeoutMs,
    apiKey: options.apiKey,
    residency,
  }
}

export interface CallSpec {
  path: string
  headers: Record<string, string>
  body: string
  signal?: AbortSignal
  /** In place of the provider's timeout (UpstreamRequest.timeoutMs). */
  timeoutMs?: number
  /** The fine-tune the request names as its model: it goes to a replica that holds it. */
  fineTune?: FineTune
}

export type Failure = { ok: false; error: UpstreamError; latencyMs: number }

export type JsonResult =
  | { ok: true; status: number; json: Record<string, unknown>; text: string; latencyMs: number }
  | Failure

export type EventsResult =
  | {
      ok: true
      events: AsyncGenerator<SseEvent>
      /** Drops the rest of the body and frees the replica; a no-op once the events ended. */
      cancel(): void
    }
  | Failure

function healthOf(error: UpstreamError, deadline: Deadline, cause?: unknown): CallHealth {
  if (deadline.callerAborted) return 'neutral'
  if (cause !== undefined && isConnectFailure(cause)) return 'down'
  // Busy is not broken: a full queue's 503 says nothing against the replica's health.
  if (error.kind === 'rate_limited' || error.kind === 'busy') return 'neutral'
  if (error.kind === 'server_error' || error.kind === 'timeout' || error.kind === 'connection') {
    return 'failure'
  }
  return 'ok'
}

/** What a failed call tells adaptive concurrency: too much (busy, 429, timeout), or nothing. */
function loadOf(error: UpstreamError): CallLoad | undefined {
  const kind = error.kind
  return kind === 'busy' || kind === 'rate_limited' || kind === 'timeout' ? 'congested' : undefined
}

/** An answer's latency and vLLM load report, for an adaptive pool's working point. */
function answeredLoad(response: HttpResponse, started: number): CallLoad {
  const waiting = waitingFromLoadHeader(response.header(LOAD_REPORT_HEADER))
  return { latencyMs: performance.now() - started, waiting }
}

type Opened =
  | {
      ok: true
      replica: Replica
      deadline: Deadline
      response: HttpResponse
      started: number
      /** Ends the call on its replica (and its use of a fine-tune there): once. */
      release(health: CallHealth, load?: CallLoad): void
    }
  | Failure

// vLLM's 404 for a model it does not hold: "The model `x` does not exist."
const MODEL_MISSING = /does not exist/i

/**
 * Sends the request and waits for the status line; non-2xx answers are read and classified.
 *
 * When the connection is refused, or the socket closes before any status line, the call moves
 * on to the next healthy replica at once, at most once per replica. A refusal means no replica
 * saw the request; a close before the status line is, in practice, a keep-alive socket the
 * replica had already closed, or a replica killed mid-request: undici retries exactly this
 * case for idempotent requests, and re-sending an LLM call at worst costs its tokens twice.
 * A busy answer (503: a vLLM replica whose queue is full) moves on to another replica with
 * room, at most once per replica, the busy one left in the pool (busy is not broken).
 * Everything else (timeouts, statuses, errors mid-body) is the retry policy's to decide.
 *
 * A call for a fine-tune goes where the fine-tune is held (fine-tune-residency.ts), loaded there first if
 * need be. A 404 saying the replica does not hold it (it restarted and lost its fine-tunes) loads
 * it again and re-sends, at most once per replica: part of this one call, not a failed attempt.
 */
async function open(context: CallContext, spec: CallSpec, accept: string): Promise<Opened> {
  const started = performance.now()
  const elapsed = () => Math.round(performance.now() - started)
  const deadline = createDeadline(spec.timeoutMs ?? context.timeoutMs, spec.signal)
  const body = spec.body
  const headers = { 'content-type': 'application/json', accept, ...spec.headers }
  const residency = spec.fineTune ? context.residency : null
  const skip = new Set<Replica>()
  let reloads = 0
  let busyError: UpstreamError | null = null
  // Replicas that answered this call busy; another with room is tried before giving up.
  let busy: Replica[] | null = null
  for (let attempt = 0; ; attempt++) {
    let replica: Replica
    let lease: FineTuneLease | null = null
    if (residency) {
      const acquired = await residency.acquire(spec.fineTune!, deadline.signal, skip)
      if (!acquired.ok) {
        // Its load could not reach that replica: another may hold or load it.
        if (acquired.replica && acquired.health === 'down' && attempt < context.pool.size) {
          skip.add(acquired.replica)
          continue
        }
        deadline.done()
        return { ok: false, error: acquired.error, latencyMs: elapsed() }
      }
      lease = acquired.lease
      replica = lease.replica
    } else if (busy) {
      const other = context.pool.another(busy)
      if (other === null) {
        deadline.done()
        return { ok: false, error: busyError!, latencyMs: elapsed() }
      }
      replica = other
    } else replica = context.pool.acquire()
    let released = false
    const release = (health: CallHealth, load?: CallLoad) => {
      if (released) return
      released = true
      lease?.release()
      context.pool.release(replica, health, load)
    }
    const fail = (error: UpstreamError, cause?: unknown): Failure => {
      deadline.done()
      release(healthOf(error, deadline, cause), context.pool.adaptive ? loadOf(error) : undefined)
      return { ok: false, error, latencyMs: elapsed() }
    }
    let response: HttpResponse
    try {
      response = await replica.client.request({
        method: 'POST',
        path: spec.path,
        headers,
        body,
        signal: deadline,
      })
    } catch (cause) {
      const error = classifyException(cause, deadline, context.apiKey)
      const health = healthOf(error, deadline, cause)
      const unanswered = health === 'down' || (health === 'failure' && isSocketClosed(cause))
      if (unanswered && attempt < context.pool.size) {
        release(health)
        skip.add(replica)
        continue
      }
      return fail(error, cause)
    }
    if (response.status >= 200 && response.status < 300) {
      return { ok: true, replica, deadline, response, started, release }
    }
    let text: string
    try {
      text = await response.text()
    } catch (cause) {
      return fail(classifyException(cause, deadline, context.apiKey), cause)
    }
    if (
      lease &&
      response.status === 404 &&
      MODEL_MISSING.test(text) &&
      reloads < context.pool.size
    ) {
      reloads++
      attempt--
      lease.lost()
      release('ok')
      continue
    }
    const error = classifyStatus(
      response.status,
      (name) => response.header(name),
      text,
      context.apiKey,
    )
    // A fine-tune's call stays where the fine-tune is held: its busy answer is returned.
    if (error.kind === 'busy' && !lease && !deadline.callerAborted && context.pool.size > 1) {
      release('neutral', context.pool.adaptive ? 'congested' : undefined)
      ;(busy ??= []).push(replica)
      busyError = error
      continue
    }
    return fail(error)
  }
}

/** POST a JSON body and parse a JSON object back; anything else is a classified failure. */
export async function postJson(context: CallContext, spec: CallSpec): Promise<JsonResult> {
  const opened = await open(context, spec, 'application/json')
  if (!opened.ok) return opened
  const { deadline, response, started } = opened
  const latency = () => Math.round(performance.now() - started)
  let text: string
  try {
    text = await response.text()
  } catch (cause) {
    const error = classifyException(cause, deadline, context.apiKey)
    deadline.done()
    const load = context.pool.adaptive ? loadOf(error) : undefined
    opened.release(healthOf(error, deadline, cause), load)
    return { ok: false, error, latencyMs: latency() }
  }
  deadline.done()
  if (context.pool.adaptive) opened.release('ok', answeredLoad(response, started))
  else opened.release('ok')
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    const message = `upstream answered ${response.status} with a body that is not a JSON object`
    const error = upstreamError('malformed_response', message, { status: response.status })
    return { ok: false, error, latencyMs: latency() }
  }
  return {
    ok: true,
    status: response.status,
    json: json as Record<string, unknown>,
    text,
    latencyMs: latency(),
  }
}

/** The longest a stream may last in all, when its provider's timeout is shorter: an hour. */
export const STREAM_TOTAL_MS = 3_600_000

/** The chunks, each arrival starting the deadline's idle timeout over. */
async function* touching(
  chunks: AsyncIterable<Uint8Array>,
  deadline: Deadline,
): AsyncGenerator<Uint8Array> {
  for await (const chunk of chunks) {
    deadline.touch()
    yield chunk
  }
}

/**
 * POST and read server-sent events. A failure before the 2xx status line is a value; after
 * it, iterating `events` throws UpstreamStreamError. The replica is released when the events
 * end, fail, are abandoned (return()) or the deadline fires, whichever comes first.
 */
export async function postStream(context: CallContext, spec: CallSpec): Promise<EventsResult> {
  const opened = await open(context, spec, 'text/event-stream')
  if (!opened.ok) return opened
  const { deadline, response } = opened
  let released = false
  const release = (health: CallHealth) => {
    if (released) return
    released = true
    deadline.done()
    opened.release(health)
  }
  // The answer has begun: a stream may take as long as it keeps sending, up to the provider's
  // timeout between bytes and STREAM_TOTAL_MS (or the timeout, if longer) in all.
  deadline.idleFromNow(Math.max(deadline.timeoutMs, STREAM_TOTAL_MS))
  // Nobody may be iterating when the deadline fires; free the replica and the socket anyway.
  deadline.onAbort(() => {
    response.discard()
    release(deadline.timedOut ? 'failure' : 'neutral')
  })

  async function* events(): AsyncGenerator<SseEvent> {
    let finished = false
    try {
      yield* readSseEvents(touching(response.chunks(), deadline))
      finished = true
    } catch (cause) {
      const error = classifyException(cause, deadline, context.apiKey)
      release(healthOf(error, deadline, cause))
      throw new UpstreamStreamError(error)
    } finally {
      if (!finished) response.discard()
      release(finished ? 'ok' : 'neutral')
    }
  }
  const cancel = () => {
    if (released) return
    response.discard()
    release('neutral')
  }
  return { ok: true, events: events(), cancel }
}
