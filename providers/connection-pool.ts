/**
 * Keep-alive connections to one origin (h1-connection.ts), at most one request on a connection at
 * a time; a request that finds none free waits its turn here.
 *
 * A connection is reused the moment its answer is complete, before the caller hears of the end:
 * a request dispatched from inside that end — which is where a provider's slot is handed on
 * (HttpClientOptions.onAnswered) — goes out on the same connection before the event loop turns.
 * (undici's Pool waited a turn of the loop before reusing a socket, about a millisecond under
 * load on top of every upstream call.) A connection the upstream closes while idle leaves the
 * pool at once; one it closes under a request fails that request before any answer, which the
 * caller retries (upstream-call.ts).
 */
import {
  H1Connection,
  H1Error,
  type ExchangeHandler,
  type H1Request,
  type H1Target,
} from './h1-connection.ts'

export interface ConnectionPoolOptions {
  /** Most connections to keep. */
  connections: number
  connectTimeoutMs: number
}

/** An exchange as the pool runs it: told its connection first, and may decline it. */
export interface PooledExchange extends ExchangeHandler {
  /** The request is about to go out on `connection`; false: it was aborted meanwhile, send nothing. */
  onRequestStart(connection: H1Connection): boolean
}

interface Waiting {
  request: H1Request
  handler: PooledExchange
}

export class ConnectionPool {
  private readonly all = new Set<H1Connection>()
  /** Free connections, the most recently used last: it is taken first, its socket warm. */
  private readonly idle: H1Connection[] = []
  private readonly waiting: Waiting[] = []
  private waitingFrom = 0
  private destroyed = false
  private readonly target: H1Target
  private readonly onClosed = (connection: H1Connection) => this.closed(connection)

  constructor(
    origin: URL,
    private readonly options: ConnectionPoolOptions,
  ) {
    const tls = origin.protocol === 'https:'
    this.target = {
      hostname: origin.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: Number(origin.port) || (tls ? 443 : 80),
      tls,
      host: origin.host,
    }
  }

  dispatch(request: H1Request, handler: PooledExchange): void {
    if (this.destroyed) return handler.onResponseError(poolClosed())
    const connection = this.freshIdle() ?? this.open()
    if (connection) this.run(connection, request, handler)
    else this.waiting.push({ request, handler })
  }

  /** Closes every connection: requests on them fail, and so do those still waiting. */
  async destroy(): Promise<void> {
    this.destroyed = true
    this.idle.length = 0
    for (const connection of [...this.all]) connection.close()
    this.all.clear()
    for (let waiting = this.next(); waiting; waiting = this.next()) {
      waiting.handler.onResponseError(poolClosed())
    }
  }

  /** The most recently used free connection that has not sat idle too long; stale ones are closed. */
  private freshIdle(): H1Connection | undefined {
    if (this.idle.length === 0) return undefined
    const now = performance.now()
    for (let connection = this.idle.pop(); connection; connection = this.idle.pop()) {
      if (!connection.stale(now)) return connection
      connection.close()
    }
    return undefined
  }

  private open(): H1Connection | null {
    if (this.all.size >= Math.max(1, this.options.connections)) return null
    const connection = new H1Connection(this.target, this.options.connectTimeoutMs, this.onClosed)
    this.all.add(connection)
    return connection
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

  private run(connection: H1Connection, request: H1Request, handler: PooledExchange): void {
    if (!handler.onRequestStart(connection)) return this.release(connection)
    try {
      connection.send(request, new PooledHandler(this, connection, handler))
    } catch (error) {
      // A request that cannot be sent (a header with a line break): the connection is untouched.
      this.release(connection)
      handler.onResponseError(error as Error)
    }
  }

  /** `connection` has ended its request: it goes to the first waiting request, or back to the free ones. */
  release(connection: H1Connection): void {
    if (this.destroyed || !connection.usable) return
    const waiting = this.next()
    if (waiting) this.run(connection, waiting.request, waiting.handler)
    else this.idle.push(connection)
  }

  /** A connection can no longer be used: it leaves the pool, and a waiting request may open another. */
  private closed(connection: H1Connection): void {
    this.all.delete(connection)
    const at = this.idle.indexOf(connection)
    if (at >= 0) this.idle.splice(at, 1)
    if (this.destroyed || this.waitingFrom >= this.waiting.length) return
    const fresh = this.open()
    const waiting = fresh && this.next()
    if (waiting) this.run(fresh, waiting.request, waiting.handler)
  }
}

function poolClosed(): Error {
  return new H1Error('the connection pool is closed', 'ECONNRESET')
}

/**
 * The caller's handler, with the connection freed when the request ends: before the caller hears
 * of the end, so that what it dispatches from there takes this connection.
 */
class PooledHandler implements ExchangeHandler {
  constructor(
    private readonly pool: ConnectionPool,
    private readonly connection: H1Connection,
    private readonly handler: ExchangeHandler,
  ) {}

  onResponseStart(status: number, headers: Record<string, string>): void {
    this.handler.onResponseStart(status, headers)
  }

  onResponseData(chunk: Buffer): void {
    this.handler.onResponseData(chunk)
  }

  onResponseEnd(): void {
    this.pool.release(this.connection)
    this.handler.onResponseEnd()
  }

  onResponseError(error: Error): void {
    this.pool.release(this.connection)
    this.handler.onResponseError(error)
  }
}
