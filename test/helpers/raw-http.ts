/**
 * HTTP/1.1 over a raw socket (node:net), for what fetch cannot do: declare a Content-Length and
 * send less, keep a chunked body coming until the server answers, frame chunks wrongly, hang up
 * mid-body. Every exchange is bounded in time and in the bytes it sends.
 */
import { connect, type Socket } from 'node:net'

export interface RawAnswer {
  /** null when no status line arrived in time. */
  status: number | null
  headers: Record<string, string>
  body: string
  /** From connecting to the whole answer (or to giving up). */
  ms: number
  /** Body bytes written before the answer was complete. */
  sentBeforeAnswer: number
}

export interface RawRequest {
  method?: string
  path: string
  headers?: Record<string, string>
  /** Sent as Content-Length, whatever is actually sent. */
  declaredLength?: number
  /** Frame `body` as chunks (Transfer-Encoding: chunked). */
  chunked?: boolean
  /** The body's bytes, sent in pieces of `pieceBytes`. */
  body?: Uint8Array
  pieceBytes?: number
  /**
   * Keep sending this filler byte after `body`, a piece at a time, until the server answers or
   * `maxBytes` have gone: a body that would go on past any limit.
   */
  streamUntilAnswer?: { maxBytes: number }
  /** After the body: finish it (default; the terminating chunk if chunked), leave it open, or hang up. */
  after?: 'finish' | 'leave-open' | 'hang-up'
  /** Raw bytes written instead of a body (e.g. broken chunk framing). */
  rawBody?: string
  timeoutMs?: number
}

export function rawRequest(baseUrl: string, request: RawRequest): Promise<RawAnswer> {
  const { hostname, port } = new URL(baseUrl)
  const started = performance.now()
  const headers: Record<string, string> = { host: `${hostname}:${port}`, ...request.headers }
  if (request.chunked) headers['transfer-encoding'] = 'chunked'
  if (request.declaredLength !== undefined)
    headers['content-length'] = String(request.declaredLength)
  const head =
    `${request.method ?? 'POST'} ${request.path} HTTP/1.1\r\n` +
    Object.entries(headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('') +
    '\r\n'
  const piece = request.pieceBytes ?? 16 * 1024
  const frame = (bytes: Uint8Array) =>
    request.chunked
      ? Buffer.concat([
          Buffer.from(`${bytes.byteLength.toString(16)}\r\n`),
          bytes,
          Buffer.from('\r\n'),
        ])
      : Buffer.from(bytes)

  return new Promise((resolve) => {
    const socket: Socket = connect(Number(port), hostname)
    let received = Buffer.alloc(0)
    let sent = 0
    let settled = false
    let answered = false
    const finish = () => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      socket.destroy()
      resolve({ ...parse(received), ms: performance.now() - started, sentBeforeAnswer: sent })
    }
    const timer = setTimeout(finish, request.timeoutMs ?? 5_000)
    socket.on('error', () => finish())
    socket.on('close', () => finish())
    socket.on('data', (data: Buffer) => {
      received = Buffer.concat([received, data])
      if (complete(received)) {
        answered = true
        finish()
      }
    })
    const write = (bytes: Buffer) =>
      new Promise<void>((done) => {
        if (settled || answered) return done()
        if (socket.write(bytes)) done()
        else socket.once('drain', () => done())
      })
    socket.on('connect', async () => {
      await write(Buffer.from(head))
      if (request.rawBody !== undefined) {
        await write(Buffer.from(request.rawBody))
        return
      }
      const body = request.body ?? new Uint8Array(0)
      for (let at = 0; at < body.byteLength && !answered && !settled; at += piece) {
        const part = body.subarray(at, at + piece)
        await write(frame(part))
        sent += part.byteLength
      }
      if (request.streamUntilAnswer) {
        const filler = new Uint8Array(piece).fill(0x61)
        while (!answered && !settled && sent < request.streamUntilAnswer.maxBytes) {
          await write(frame(filler))
          sent += filler.byteLength
          // Give the server a moment to answer between pieces, as a slow client would.
          await new Promise((next) => setImmediate(next))
        }
      }
      const after = request.after ?? 'finish'
      if (after === 'hang-up') socket.destroy()
      else if (after === 'finish' && request.chunked) await write(Buffer.from('0\r\n\r\n'))
    })
  })
}

/** True once the head and, by its Content-Length, the whole body of an answer are in. */
function complete(bytes: Buffer): boolean {
  const end = bytes.indexOf('\r\n\r\n')
  if (end < 0) return false
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(bytes.subarray(0, end).toString('latin1'))
  return bytes.byteLength - (end + 4) >= Number(length?.[1] ?? 0)
}

function parse(bytes: Buffer): Pick<RawAnswer, 'status' | 'headers' | 'body'> {
  const end = bytes.indexOf('\r\n\r\n')
  if (end < 0) return { status: null, headers: {}, body: '' }
  const [statusLine, ...lines] = bytes.subarray(0, end).toString('latin1').split('\r\n')
  const headers: Record<string, string> = {}
  for (const line of lines) {
    const colon = line.indexOf(':')
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
  }
  return {
    status: Number(statusLine.split(' ')[1]),
    headers,
    body: bytes.subarray(end + 4).toString('utf8'),
  }
}

/**
 * Writes `wire` exactly as it is and returns everything the server sends until it closes, a
 * keep-alive answer's body has come whole, or 2 s passed: for requests no client would form.
 */
export function rawWire(baseUrl: string, wire: string): Promise<string> {
  const { hostname, port } = new URL(baseUrl)
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname)
    let received = ''
    const done = () => {
      clearTimeout(timer)
      socket.destroy()
      resolve(received)
    }
    const timer = setTimeout(done, 2_000)
    socket.on('connect', () => socket.write(wire))
    socket.on('data', (data) => {
      received += data.toString('latin1')
      const head = received.indexOf('\r\n\r\n')
      const length = /content-length: (\d+)/i.exec(received)
      if (head !== -1 && length && received.length >= head + 4 + Number(length[1])) done()
    })
    socket.on('error', done)
    socket.on('close', done)
  })
}
