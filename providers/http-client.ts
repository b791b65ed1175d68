/**
 * The only module that makes upstream HTTP calls: one pool of keep-alive connections per
 * replica (connection-pool.ts) over Bun's own sockets (h1-connection.ts).
 *
 * Not Bun's fetch: it runs at most 256 requests at once per process
 * (BUN_CONFIG_MAX_HTTP_REQUESTS, read at start-up only; setting it from code had no effect) and
 * queues the rest, and LLM calls take seconds, so thousands in flight are normal. Measured against
 * the simulator at 512 in flight, 50 ms latency: fetch 5,016 requests/s, undici 8,969/s. Not undici
 * either, since an earlier version of this module: on Bun it cost 7 times the CPU per request of a
 * socket of Bun's own (h1-connection.ts), and that was most of the gateway's CPU per batch line.
 */
import { ConnectionPool, type PooledExchange } from './connection-pool.ts'
import type { H1Connection } from './h1-connection.ts'

/**
 * What aborts a request: an AbortSignal, or a call's deadline, which stands in for one without
 * being one (deadline.ts). Only what the client uses of a signal.
 */
export interface AbortSource {
  readonly aborted: boolean
  readonly reason: unknown
  addEventListener(type: 'abort', listener: EventListenerObject, options?: { once?: boolean }): void
  removeEventListener(type: 'abort', listener: EventListenerObject): void
}

export interface HttpRequest {
  method: 'GET' | 'POST'
  /** Appended to the base URL's path: '/chat/completions'. */
  path: string
  headers: Record<string, string>
  body?: string
  /** Aborts the request and the reading of its body. */
  signal: AbortSource
  /**
   * The gateway's own request on the side of a call (loading a fine-tune): its answer is not
   * the call's, so it never fires onAnswered.
   */
  control?: boolean
}

export interface HttpResponse {
  status: number
  header(name: string): string | null
  /** The whole body as text. */
  text(): Promise<string>
  /** The body as it arrives. */
  chunks(): AsyncIterable<Uint8Array>
  /** Drops the body unread so the connection can be reused or closed. */
  discard(): void
}

export interface HttpClient {
  readonly baseUrl: string
  request(request: HttpRequest): Promise<HttpResponse>
  close(): Promise<void>
}

export interface HttpClientOptions {
  /** Most connections kept to this replica. */
  connections: number
  connectTimeoutMs: number
  /**
   * Called once a POST that does not ask for an event stream has its 2xx answer whole, right
   * there, before the body is handed on: a request dispatched from it takes this connection the
   * moment the answer is complete (connection-pool.ts). That is where the caller hands the call's
   * slot on (src/upstream/upstreams.ts); probes (GET) and streams, read after their end, are not
   * whole answers in that sense. Exceptions are swallowed; it must not fail the answer.
   */
  onAnswered?: () => void
}

export type HttpClientFactory = (baseUrl: string, options: HttpClientOptions) => HttpClient

/** A pooled client for one base URL such as http://127.0.0.1:8090/v1. */
export function createHttpClient(baseUrl: string, options: HttpClientOptions): HttpClient {
  const url = new URL(baseUrl)
  const basePath = url.pathname.replace(/\/+$/, '')
  const pool = new ConnectionPool(url, {
    connections: options.connections,
    connectTimeoutMs: options.connectTimeoutMs,
  })

  const onAnswered = options.onAnswered
  return {
    baseUrl,
    request: (request) =>
      exchange(
        pool,
        basePath + request.path,
        request,
        onAnswered && answersWhole(request) ? onAnswered : undefined,
      ),
    async close() {
      await pool.destroy()
    },
  }
}

/** Resolves at the status line; the body is then read whole or as it arrives. */
function exchange(
  pool: ConnectionPool,
  path: string,
  request: HttpRequest,
  onAnswered: (() => void) | undefined,
): Promise<HttpResponse> {
  const { signal } = request
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise((resolve, reject) => {
    const exchange = new Exchange(signal, resolve, reject, onAnswered)
    pool.dispatch(
      { path, method: request.method, headers: request.headers, body: request.body ?? null },
      exchange,
    )
  })
}

/** A POST whose answer is read whole (HttpClientOptions.onAnswered), not an event stream. */
function answersWhole(request: HttpRequest): boolean {
  if (request.method !== 'POST' || request.control) return false
  const accept = request.headers.accept ?? request.headers.Accept
  return !(accept && accept.includes('text/event-stream'))
}

/** Chunks kept past this many unread pause the socket, for a body read as it arrives. */
const MAX_UNREAD_CHUNKS = 64

/**
 * One exchange: the pool's handler, the listener of the caller's signal, and, from the status
 * line on, the response itself. One object with its methods on the prototype rather than a
 * handler, a listener and a body made of closures: this runs on every upstream call.
 */
class Exchange implements PooledExchange, HttpResponse {
  status = 0
  private headers: Record<string, string> = {}
  private connection: H1Connection | null = null
  /** Aborted while still waiting for a connection: the request is dropped at its start. */
  private abortedEarly = false
  private started = false
  private unread: Buffer[] = []
  private finished = false
  private error: Error | null = null
  private wake: (() => void) | null = null
  /** Read as it arrives (chunks()): the socket pauses while the reader is behind. */
  private streaming = false
  private discarded = false

  constructor(
    private readonly signal: AbortSource,
    private readonly resolve: (response: HttpResponse) => void,
    private readonly reject: (error: unknown) => void,
    private readonly onAnswered: (() => void) | undefined,
  ) {
    signal.addEventListener('abort', this, { once: true })
  }

  /** The caller's signal aborted (EventListener). */
  handleEvent(): void {
    if (this.connection) return this.connection.abort(this.signal.reason as Error)
    // Still waiting for a connection: the caller is told now.
    this.abortedEarly = true
    this.reject(this.signal.reason)
  }

  onRequestStart(connection: H1Connection): boolean {
    if (this.abortedEarly) return false
    this.connection = connection
    return true
  }

  onResponseStart(status: number, headers: Record<string, string>): void {
    this.status = status
    this.headers = headers
    this.started = true
    this.resolve(this)
  }

  onResponseData(chunk: Buffer): void {
    if (this.discarded) return
    this.unread.push(chunk)
    if (this.streaming && this.unread.length >= MAX_UNREAD_CHUNKS && !this.connection!.paused)
      this.connection!.pause()
    if (this.wake) this.wake()
  }

  onResponseEnd(): void {
    this.unhook()
    if (this.onAnswered && this.started && this.status < 300) {
      try {
        this.onAnswered()
      } catch {}
    }
    this.end(null)
  }

  onResponseError(error: Error): void {
    this.unhook()
    if (this.started) this.end(error)
    else this.reject(error)
  }

  header(name: string): string | null {
    return this.headers[name.toLowerCase()] ?? null
  }

  private unhook(): void {
    this.signal.removeEventListener('abort', this)
  }

  private end(error: Error | null): void {
    this.finished = true
    this.error = error
    if (this.wake) this.wake()
  }

  /** Resolves at the next chunk or the end. */
  private next(): Promise<void> {
    return new Promise((resolve) => {
      this.wake = () => {
        this.wake = null
        resolve()
      }
    })
  }

  private whole(): string {
    const parts = this.unread
    this.unread = []
    if (parts.length === 0) return ''
    return (parts.length === 1 ? parts[0] : Buffer.concat(parts)).toString('utf8')
  }

  text(): Promise<string> {
    if (this.finished)
      return this.error ? Promise.reject(this.error) : Promise.resolve(this.whole())
    // One wait for the end, however many chunks arrive before it.
    return new Promise((resolve, reject) => {
      this.wake = () => {
        if (!this.finished) return
        this.wake = null
        if (this.error) reject(this.error)
        else resolve(this.whole())
      }
    })
  }

  async *chunks(): AsyncIterable<Uint8Array> {
    this.streaming = true
    for (;;) {
      if (this.unread.length > 0) {
        const parts = this.unread
        this.unread = []
        // Once the answer is complete the connection may be another exchange's: leave it be.
        if (!this.finished && this.connection!.paused) this.connection!.resume()
        yield* parts
        continue
      }
      if (this.error) throw this.error
      if (this.finished) return
      await this.next()
    }
  }

  discard(): void {
    this.discarded = true
    this.unread = []
    if (!this.finished) this.connection?.abort(new Error('response body discarded'))
  }
}
