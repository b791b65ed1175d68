/**
 * One keep-alive HTTP/1.1 connection to an upstream over Bun's own sockets (Bun.connect, TLS for
 * https), one request at a time: the transport of connection-pool.ts.
 *
 * Why not undici: on Bun, undici runs on the node:net and stream compatibility layers and its
 * wasm parser, and that was most of the gateway's CPU per batch line. One request and answer
 * through a warm connection, one at a time, to a local Bun.serve (2-core box, CPU of the client
 * process): undici 206 µs, Bun's fetch 76 µs, a socket of Bun's own 29 µs. Bun's fetch runs at
 * most 256 requests at once per process (http-client.ts), so it cannot carry thousands of LLM
 * calls in flight.
 *
 * What an upstream may answer is all read: Content-Length, chunked (trailers skipped) or
 * close-delimited bodies, 1xx before the status line, HEAD, 204 and 304 without a body,
 * `connection: close` and HTTP/1.0. Requests are never pipelined; bytes that arrive while no
 * request is under way mean the connection cannot be trusted, and it is closed.
 */
import { channel } from 'node:diagnostics_channel'
import type { Socket } from 'bun'

export interface H1Target {
  hostname: string
  port: number
  tls: boolean
  /** The Host header: host, and port when it is not the scheme's default. */
  host: string
}

export interface H1Request {
  method: string
  path: string
  headers: Record<string, string>
  body: string | null
}

/** What hears one exchange: the answer's head, its body as it arrives, then its end or failure. */
export interface ExchangeHandler {
  /** Header names lower-case; repeated ones joined with ", ". */
  onResponseStart(status: number, headers: Record<string, string>): void
  onResponseData(chunk: Buffer): void
  onResponseEnd(): void
  onResponseError(error: Error): void
}

/** A failure of the connection, with a code classify-error.ts knows (ECONNRESET, CONNECT_TIMEOUT, …). */
export class H1Error extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message)
  }
}

/** Told each request as it is written: for tests that check when a request went out. */
export const requestSent = channel('multigrid:upstream:request-sent')

/**
 * A connection idle longer than this is closed rather than reused, as undici does by default: an
 * upstream's own idle timeout is often 5 s, and a request sent as it closes is lost.
 */
const DEFAULT_IDLE_MS = 4_000

/** An answer's head may be this long at most (undici's default too). */
const MAX_HEAD_BYTES = 64 * 1024
const CRLF_CRLF = Buffer.from('\r\n\r\n')
const CR = 0x0d
const LF = 0x0a

const enum Body {
  /** Reading the head (status line and headers). */
  Head,
  /** Content-Length: `remaining` bytes left. */
  Length,
  /** Chunked: reading a chunk's size line. */
  ChunkSize,
  /** Chunked: `remaining` bytes of a chunk's data left. */
  ChunkData,
  /** Chunked: the CRLF after a chunk's data. */
  ChunkEnd,
  /** Chunked: trailer lines, up to an empty one. */
  Trailers,
  /** Until the upstream closes the connection. */
  UntilClose,
}

/** Bun's socket handlers, shared by every connection (socket.data is the connection). */
const HANDLERS = {
  data: (socket: Socket<H1Connection>, data: Buffer) => socket.data.received(data),
  drain: (socket: Socket<H1Connection>) => socket.data.drained(),
  end: (socket: Socket<H1Connection>) => socket.data.lost(null),
  close: (socket: Socket<H1Connection>, error?: Error) => socket.data.lost(error ?? null),
  error: (socket: Socket<H1Connection>, error: Error) => socket.data.lost(error),
  handshake: (socket: Socket<H1Connection>, success: boolean, refusal: Error | null) =>
    socket.data.handshook(success, refusal),
}

export class H1Connection {
  private socket: Socket<H1Connection> | null = null
  private connecting: Promise<void> | null = null
  private closed = false
  /** The exchange under way. */
  private handler: ExchangeHandler | null = null
  private method = ''
  /** Bytes of the request the socket did not take yet. */
  private unsent: Buffer | null = null
  /** TLS, while connecting: ends the wait for the handshake. */
  private settleHandshake: ((error: Error | null) => void) | null = null
  private lostConnecting: H1Error | null = null

  // The answer being read.
  private state = Body.Head
  private head: Buffer | null = null
  private remaining = 0
  private line = ''
  private keepAlive = true
  /** How long it may sit idle after an answer (idleTimeout), and until when that is. */
  private idleMs = DEFAULT_IDLE_MS
  private reusableUntil = Infinity

  constructor(
    private readonly target: H1Target,
    private readonly connectTimeoutMs: number,
    /** Told once, when the connection can no longer be used. */
    private readonly onClosed: (connection: H1Connection) => void,
  ) {}

  /** Whether a request may be sent on it now: open (or opening) and not busy. */
  get usable(): boolean {
    return !this.closed && this.handler === null
  }

  /**
   * Whether it has sat idle too long to be trusted with a request (`now`: performance.now()): the
   * upstream may be closing it right then, and a request sent into that close is lost.
   */
  stale(now: number): boolean {
    return now > this.reusableUntil
  }

  /** Whether reading is paused (pause()). */
  paused = false

  /** Sends `request`, connecting first if need be; `handler` hears the rest. Throws on a header that cannot be sent. */
  send(request: H1Request, handler: ExchangeHandler): void {
    const text = requestText(this.target.host, request)
    this.handler = handler
    this.method = request.method
    this.state = Body.Head
    this.head = null
    this.keepAlive = true
    if (this.socket) return this.write(text, request)
    ;(this.connecting ??= this.connect()).then(
      () => {
        if (this.handler === handler) this.write(text, request)
      },
      (error: Error) => this.fail(error),
    )
  }

  /** Ends the exchange under way with `error`, and the connection with it. */
  abort(error: Error): void {
    this.fail(error)
  }

  pause(): void {
    this.paused = true
    this.socket?.pause()
  }

  resume(): void {
    this.paused = false
    this.socket?.resume()
  }

  /** Closes the connection; an exchange under way fails. */
  close(): void {
    this.fail(new H1Error('the connection pool is closed', 'ECONNRESET'))
    this.closeNow()
  }

  private async connect(): Promise<void> {
    const { hostname, port, tls } = this.target
    let timer: ReturnType<typeof setTimeout> | undefined
    const timeout = new Promise<never>((_, reject) => {
      const why = `no connection to ${hostname}:${port} within ${this.connectTimeoutMs} ms`
      timer = setTimeout(() => reject(new H1Error(why, 'CONNECT_TIMEOUT')), this.connectTimeoutMs)
    })
    const handshake = tls
      ? new Promise<void>((resolve, reject) => {
          this.settleHandshake = (error) => (error ? reject(error) : resolve())
        })
      : null
    const opening = Bun.connect({ hostname, port, tls, data: this, socket: HANDLERS })
    try {
      const socket = await Promise.race([opening, timeout])
      // Nothing is written before the upstream's certificate verified.
      if (handshake) await Promise.race([handshake, timeout])
      if (this.lostConnecting) throw this.lostConnecting
      if (this.closed) {
        socket.terminate()
        return
      }
      socket.setNoDelay(true)
      this.socket = socket
    } catch (error) {
      // A socket that opens after its timeout, or whose certificate did not verify, is closed.
      opening.then(
        (late) => late.terminate(),
        () => {},
      )
      this.settleHandshake = null
      this.closeNow()
      throw error
    } finally {
      clearTimeout(timer)
    }
  }

  private write(text: string, request: H1Request): void {
    if (requestSent.hasSubscribers) requestSent.publish({ path: request.path })
    const written = this.socket!.write(text)
    if (written < 0) return // the socket failed: its 'close' follows
    // Mostly the whole request at once; what the socket did not take goes on 'drain'.
    if (written < Buffer.byteLength(text)) this.unsent = Buffer.from(text).subarray(written)
  }

  /** The socket can take more (Bun's 'drain'). */
  drained(): void {
    const unsent = this.unsent
    if (!unsent || !this.socket) return
    const written = this.socket.write(unsent)
    this.unsent = written < unsent.byteLength ? unsent.subarray(Math.max(written, 0)) : null
  }

  /** Bytes from the upstream (Bun's 'data': a buffer of its own each time, kept as it is). */
  received(data: Buffer): void {
    if (this.handler === null) return this.closeNow()
    let at = 0
    while (at < data.byteLength && this.handler !== null) {
      switch (this.state) {
        case Body.Head: {
          at = this.readHead(data, at)
          break
        }
        case Body.Length: {
          at = this.takeBody(data, at)
          if (this.remaining === 0) this.complete(at < data.byteLength)
          break
        }
        case Body.UntilClose: {
          this.handler.onResponseData(at === 0 ? data : data.subarray(at))
          at = data.byteLength
          break
        }
        case Body.ChunkData: {
          at = this.takeBody(data, at)
          if (this.remaining === 0) this.state = Body.ChunkEnd
          break
        }
        default:
          at = this.readChunkLines(data, at)
      }
    }
  }

  /** Hands the handler up to `remaining` body bytes from `at`; answers where reading goes on. */
  private takeBody(data: Buffer, at: number): number {
    const take = Math.min(this.remaining, data.byteLength - at)
    this.remaining -= take
    this.handler!.onResponseData(data.subarray(at, at + take))
    return at + take
  }

  /** The socket ended or failed: an answer read to its close is complete; anything else fails. */
  lost(error: Error | null): void {
    if (this.socket === null) {
      // A socket closed here (or one that opened late) says nothing more.
      if (this.closed) return
      // Still connecting: connect() reports it (the TLS refusal, if that came first).
      const code = (error as { code?: string } | null)?.code ?? 'ECONNRESET'
      this.lostConnecting ??= new H1Error(
        `the connection to the upstream was lost while opening: ${error?.message ?? 'closed'}`,
        code,
      )
      return this.handshook(false, this.lostConnecting)
    }
    if (this.handler && this.state === Body.UntilClose && error === null) this.complete(false)
    const code = (error as { code?: string } | null)?.code ?? 'ECONNRESET'
    this.fail(
      new H1Error(
        error
          ? `the connection to the upstream failed: ${error.message}`
          : 'the upstream closed the connection before its answer was complete',
        code,
      ),
    )
    this.closeNow()
  }

  /** TLS: the handshake is over; the request goes out only once the certificate verified. */
  handshook(success: boolean, refusal: Error | null): void {
    const settle = this.settleHandshake
    this.settleHandshake = null
    if (!settle) return
    if (success && !refusal) return settle(null)
    if (refusal instanceof H1Error) return settle(refusal)
    const code = (refusal as { code?: string } | null)?.code ?? 'TLS_HANDSHAKE'
    const why = refusal?.message ?? 'the handshake failed'
    settle(new H1Error(`TLS with the upstream failed: ${why}`, code))
  }

  /** Reads the head from data[at…]; returns where the body starts, or data's end. */
  private readHead(data: Buffer, at: number): number {
    const bytes = this.head ? Buffer.concat([this.head, data.subarray(at)]) : data.subarray(at)
    // The end of the head may straddle two reads: look from 3 bytes before the new ones.
    const from = this.head ? Math.max(0, this.head.byteLength - 3) : 0
    const end = bytes.indexOf(CRLF_CRLF, from)
    if (end < 0) {
      if (bytes.byteLength > MAX_HEAD_BYTES) this.protocolError('an answer head over 64 KiB')
      else this.head = Buffer.from(bytes)
      return data.byteLength
    }
    const consumed = end + 4 - (this.head?.byteLength ?? 0)
    this.head = null
    const parsed = parseHead(bytes.toString('latin1', 0, end))
    if (!parsed) {
      this.protocolError('an answer that is not HTTP/1.x')
      return data.byteLength
    }
    const { status, headers, http10 } = parsed
    // 1xx: the real head follows.
    if (status < 200) return at + consumed
    const connection = headers.connection?.toLowerCase() ?? ''
    this.keepAlive = http10 ? connection.includes('keep-alive') : !connection.includes('close')
    this.idleMs = idleTimeout(headers['keep-alive'])
    const handler = this.handler!
    handler.onResponseStart(status, headers)
    if (this.handler !== handler) return data.byteLength // aborted from there
    const length = headers['content-length']
    if (this.method === 'HEAD' || status === 204 || status === 304) {
      this.complete(at + consumed < data.byteLength)
    } else if (headers['transfer-encoding']?.toLowerCase().includes('chunked')) {
      this.state = Body.ChunkSize
      this.line = ''
    } else if (length !== undefined) {
      if (!/^\d{1,15}$/.test(length)) {
        this.protocolError(`an answer with content-length "${length.slice(0, 40)}"`)
        return data.byteLength
      }
      this.remaining = Number(length)
      this.state = Body.Length
      if (this.remaining === 0) this.complete(at + consumed < data.byteLength)
    } else {
      this.state = Body.UntilClose
      this.keepAlive = false
    }
    return at + consumed
  }

  /** Chunk size lines, the CRLF after a chunk, and trailers; returns where it stopped. */
  private readChunkLines(data: Buffer, at: number): number {
    const lineEnd = data.indexOf(LF, at)
    const stop = lineEnd < 0 ? data.byteLength : lineEnd
    this.line += data.toString('latin1', at, stop)
    if (this.line.length > 1024) {
      this.protocolError('a chunk line over 1 KiB')
      return data.byteLength
    }
    if (lineEnd < 0) return data.byteLength
    const line =
      this.line.charCodeAt(this.line.length - 1) === CR ? this.line.slice(0, -1) : this.line
    this.line = ''
    const next = lineEnd + 1
    if (this.state === Body.ChunkEnd) {
      if (line !== '') this.protocolError('a chunk longer than its size')
      else this.state = Body.ChunkSize
    } else if (this.state === Body.ChunkSize) {
      const size = /^[0-9a-fA-F]{1,12}/.exec(line)
      if (!size) this.protocolError(`a chunk size "${line.slice(0, 40)}"`)
      else if ((this.remaining = parseInt(size[0], 16)) === 0) this.state = Body.Trailers
      else this.state = Body.ChunkData
    } else if (line === '') {
      this.complete(next < data.byteLength)
    }
    return next
  }

  /** The answer is whole: the connection is free again (or closed) before the handler hears it. */
  private complete(moreBytes: boolean): void {
    const handler = this.handler!
    this.handler = null
    this.state = Body.Head
    // An answer that came before the whole request went out (a 413 at the head) leaves the
    // connection mid-request: it cannot carry another.
    if (!this.keepAlive || moreBytes || this.unsent) this.closeNow()
    else this.reusableUntil = performance.now() + this.idleMs
    if (this.paused) this.resume()
    handler.onResponseEnd()
  }

  private protocolError(what: string): void {
    this.fail(new H1Error(`the upstream sent ${what}`, 'HPE_INVALID'))
    this.closeNow()
  }

  private fail(error: Error): void {
    const handler = this.handler
    if (!handler) return
    this.handler = null
    this.closeNow()
    handler.onResponseError(error)
  }

  private closeNow(): void {
    if (this.closed && this.socket === null) return
    const first = !this.closed
    this.closed = true
    const socket = this.socket
    this.socket = null
    this.unsent = null
    socket?.terminate()
    if (first) this.onClosed(this)
  }
}

/** How long to keep a connection idle: a second less than the upstream's `keep-alive: timeout=N`, if it says. */
function idleTimeout(keepAlive: string | undefined): number {
  const said = keepAlive && /(?:^|[\s,])timeout=(\d+)/i.exec(keepAlive)
  return said
    ? Math.min(DEFAULT_IDLE_MS, Math.max(0, Number(said[1]) * 1000 - 1000))
    : DEFAULT_IDLE_MS
}

/** The request as one string: request line, headers, then the body. */
function requestText(host: string, { method, path, headers, body }: H1Request): string {
  if (!/^\/[^\s]*$/.test(path)) throw new H1Error(`a request path "${path}"`, 'INVALID_ARGUMENT')
  let text = `${method} ${path} HTTP/1.1\r\nhost: ${host}\r\n`
  for (const name in headers) {
    const value = headers[name]
    const lower = name.toLowerCase()
    // Framing is this module's own; a caller's would contradict it.
    if (lower === 'host' || lower === 'content-length' || lower === 'transfer-encoding') continue
    if (lower === 'connection' || lower === 'keep-alive') continue
    if (!TOKEN.test(name) || /[\r\n\0]/.test(value))
      throw new H1Error(`a header ${JSON.stringify(name)} that cannot be sent`, 'INVALID_ARGUMENT')
    text += `${name}: ${value}\r\n`
  }
  if (body !== null) text += `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  else text += method === 'GET' || method === 'HEAD' ? '\r\n' : 'content-length: 0\r\n\r\n'
  return text
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/

/** The status and headers of a head (latin1 text without its final CRLFCRLF), or null. */
function parseHead(
  text: string,
): { status: number; headers: Record<string, string>; http10: boolean } | null {
  // One pass with indexOf, no array of lines: this runs on every upstream answer.
  let lineEnd = text.indexOf('\r\n')
  if (lineEnd < 0) lineEnd = text.length
  const statusLine = STATUS_LINE.exec(text.slice(0, lineEnd))
  if (!statusLine) return null
  const headers: Record<string, string> = {}
  for (let at = lineEnd + 2; at < text.length; at = lineEnd + 2) {
    lineEnd = text.indexOf('\r\n', at)
    if (lineEnd < 0) lineEnd = text.length
    const colon = text.indexOf(':', at)
    if (colon <= at || colon > lineEnd) return null
    const name = text.slice(at, colon).trim().toLowerCase()
    const value = text.slice(colon + 1, lineEnd).trim()
    const before = headers[name]
    headers[name] = before === undefined ? value : `${before}, ${value}`
  }
  return { status: Number(statusLine[2]), headers, http10: statusLine[1] === '0' }
}

const STATUS_LINE = /^HTTP\/1\.([01]) (\d{3})(?: |$)/
