/**
 * Keep-alive connections to one origin, one undici Client each, at most one request on a
 * connection at a time; a request that finds none free waits its turn here.
 *
 * Why not undici's Pool: before it reuses a connection, undici waits one turn of the event loop
 * (a check for bytes or a close the server sent while the socket sat idle, and the Pool's own
 * wait for the connection to drain). Under load a turn of the loop is about a millisecond, and
 * every request paid it on top of the upstream's own latency: at 256 in flight against the
 * simulator at 50 ms, 1.2 ms of the 52.7 ms recorded (bench/dispatch), so 2% fewer lines a
 * second than the slots allowed. A request dispatched while a response is being completed —
 * from inside that response's end, which is where a provider's slot is handed on
 * (HttpClientOptions.onAnswered) — is taken by the same connection as soon as the answer is
 * complete, the way undici itself sends a request queued behind another: no idle check is due,
 * since the socket was never idle.
 *
 * Requests are never pipelined: a connection is given a request only when it has none, or in
 * that hand-over, when undici holds the new one back until the last answer is complete (it never
 * sends a request that is not idempotent behind another). `pipelining: 2` only lets undici send
 * it at once then rather than a loop turn later. A server that closes the connection after all
 * fails that request before any answer, which the caller retries (upstream-call.ts).
 */
import type { IncomingHttpHeaders } from 'node:http'
import { Client, type Dispatcher } from 'undici/index.js'

export interface ConnectionPoolOptions {
  /** Most connections to keep. */
  connections: number
  connectTimeoutMs: number
}

interface Waiting {
  options: Dispatcher.DispatchOptions
  handler: Dispatcher.DispatchHandler
}

export class ConnectionPool {
  private readonly all: Client[] = []
  /** Free connections, the most recently used last: it is taken first, its socket warm. */
  private readonly idle: Client[] = []
  private readonly waiting: Waiting[] = []
  private waitingFrom = 0
  private destroyed = false

  constructor(
    private readonly origin: string,
    private readonly options: ConnectionPoolOptions,
  ) {}

  dispatch(options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler): void {
    if (this.destroyed)
      return handler.onResponseError?.(null as never, new Error('the connection pool is closed'))
    const client = this.idle.pop() ?? this.open()
    if (client) this.run(client, options, handler)
    else this.waiting.push({ options, handler })
  }

  /** Closes every connection: requests on them fail, and so do those still waiting. */
  async destroy(): Promise<void> {
    this.destroyed = true
    const clients = this.all.splice(0)
    this.idle.length = 0
    for (let waiting = this.next(); waiting; waiting = this.next()) {
      waiting.handler.onResponseError?.(null as never, new Error('the connection pool is closed'))
    }
    await Promise.all(clients.map((client) => client.destroy()))
  }

  private open(): Client | null {
    if (this.all.length >= Math.max(1, this.options.connections)) return null
    const client = new Client(this.origin, {
      pipelining: 2,
      connectTimeout: this.options.connectTimeoutMs,
      // The caller's deadline covers the whole call, body included; undici's own per-phase
      // timers (300 s by default) would only fire later and less precisely.
      headersTimeout: 0,
      bodyTimeout: 0,
    })
    this.all.push(client)
    return client
  }

  private next(): Waiting | undefined {
    if (this.waitingFrom >= this.waiting.length) return undefined
    const item = this.waiting[this.waitingFrom]
    this.waiting[this.waitingFrom++] = undefined as never
    if (this.waitingFrom === this.waiting.length) {
      this.waiting.length = 0
      this.waitingFrom = 0
    }
    return item
  }

  private run(
    client: Client,
    options: Dispatcher.DispatchOptions,
    handler: Dispatcher.DispatchHandler,
  ): void {
    const pooled = new PooledHandler(this, client, handler)
    try {
      client.dispatch(options, pooled)
    } catch (error) {
      pooled.free()
      throw error
    }
  }

  /** `client` has ended its request: it goes to the first waiting request, or back to the free ones. */
  release(client: Client): void {
    if (this.destroyed) return
    const waiting = this.next()
    if (!waiting) {
      this.idle.push(client)
      return
    }
    try {
      this.run(client, waiting.options, waiting.handler)
    } catch (error) {
      // Its own failure, not that of the request whose end freed the connection.
      waiting.handler.onResponseError?.(null as never, error as Error)
    }
  }
}

/**
 * The caller's handler, with the connection freed when the request ends: before the caller hears
 * of the end, so that what it dispatches from there takes this connection. Passes on the hooks
 * http-client.ts uses.
 */
class PooledHandler implements Dispatcher.DispatchHandler {
  private freed = false

  constructor(
    private readonly pool: ConnectionPool,
    private readonly client: Client,
    private readonly handler: Dispatcher.DispatchHandler,
  ) {}

  free(): void {
    if (this.freed) return
    this.freed = true
    this.pool.release(this.client)
  }

  onRequestStart(controller: Dispatcher.DispatchController, context: unknown): void {
    this.handler.onRequestStart?.(controller, context)
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: IncomingHttpHeaders,
    message?: string,
  ): void {
    this.handler.onResponseStart?.(controller, status, headers, message)
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    this.handler.onResponseData?.(controller, chunk)
  }

  onResponseEnd(controller: Dispatcher.DispatchController, trailers: IncomingHttpHeaders): void {
    this.free()
    this.handler.onResponseEnd?.(controller, trailers)
  }

  onResponseError(controller: Dispatcher.DispatchController, error: Error): void {
    this.free()
    this.handler.onResponseError?.(controller, error)
  }
}
