/**
 * The upstream transport (providers/h1-connection.ts, through createHttpClient) against a raw TCP
 * server on 127.0.0.1 that writes each answer byte for byte as a test scripts it: every framing an
 * upstream may use, heads and chunks split across reads, answers that break off, a connection the
 * server closes while idle, backpressure on a streamed body, and TLS with a certificate that
 * verifies and one that does not.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Socket, TCPSocketListener } from 'bun'
import { isConnectFailure, isSocketClosed } from '../../providers/classify-error.ts'
import { createHttpClient, type HttpClient } from '../../providers/http-client.ts'

type Answer = (socket: Socket<Conn>, request: string) => Promise<void> | void
interface Conn {
  id: number
  buffered: string
}

/** Answers by path; each request as the server read it, with the connection it came on. */
const answers = new Map<string, Answer>()
const seen: { path: string; conn: number; request: string }[] = []
let nextConn = 0
let server: TCPSocketListener<Conn>

beforeAll(() => {
  server = Bun.listen<Conn>({
    hostname: '127.0.0.1',
    port: 0,
    socket: {
      open(socket) {
        socket.data = { id: nextConn++, buffered: '' }
      },
      data(socket, data) {
        socket.data.buffered += data.toString('latin1')
        const end = socket.data.buffered.indexOf('\r\n\r\n')
        if (end < 0) return
        const length = Number(/content-length: (\d+)/i.exec(socket.data.buffered)?.[1] ?? 0)
        if (socket.data.buffered.length < end + 4 + length) return
        const request = socket.data.buffered.slice(0, end + 4 + length)
        socket.data.buffered = socket.data.buffered.slice(end + 4 + length)
        const path = request.split(' ')[1]
        seen.push({ path, conn: socket.data.id, request })
        void answers.get(path)!(socket, request)
      },
    },
  })
})
afterAll(() => server.stop(true))

const clients: HttpClient[] = []
function client(baseUrl = `http://127.0.0.1:${server.port}`): HttpClient {
  const made = createHttpClient(baseUrl, { connections: 1, connectTimeoutMs: 2_000 })
  clients.push(made)
  return made
}
afterAll(() => Promise.all(clients.map((c) => c.close())))

const signal = new AbortController().signal
const post = (http: HttpClient, path: string, headers: Record<string, string> = {}) =>
  http.request({ method: 'POST', path, headers, body: '{"q":"é"}', signal })
const failure = (promise: Promise<unknown>) =>
  promise.then(
    () => null,
    (error: Error & { code?: string }) => error,
  )

/** Writes `parts` one after another, each in its own write a few ms apart. */
async function dribble(socket: Socket<Conn>, parts: string[]) {
  for (const part of parts) {
    socket.write(part)
    await Bun.sleep(2)
  }
}
const bytesOf = (text: string) => text.split('')

describe('the upstream transport', () => {
  test('the request goes out as one well-formed HTTP/1.1 request with its byte length', async () => {
    answers.set('/echo', (socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}')
    })
    const response = await post(client(), '/echo', { 'content-type': 'application/json' })
    expect(await response.text()).toBe('{}')
    const request = seen.at(-1)!.request
    expect(request).toStartWith(`POST /echo HTTP/1.1\r\nhost: 127.0.0.1:${server.port}\r\n`)
    expect(request).toContain('content-type: application/json\r\n')
    // "é" is two bytes: the length counts bytes, not characters.
    expect(request).toEndWith('content-length: 10\r\n\r\n{"q":"é"}'.replace('é', '\xc3\xa9'))
  })

  test('a chunked answer written a byte at a time, with an extension and trailers, then the connection is reused', async () => {
    const body = '{"answer":"chunked"}'
    answers.set('/chunked', (socket) =>
      dribble(socket, [
        ...bytesOf('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Id: a\r\nx-id: b\r\n\r\n'),
        ...bytesOf(`5;ext=1\r\n${body.slice(0, 5)}\r\n`),
        `${(body.length - 5).toString(16)}\r\n${body.slice(5)}\r\n`,
        ...bytesOf('0\r\nx-trailer: t\r\n\r\n'),
      ]),
    )
    const http = client()
    const first = await post(http, '/chunked')
    expect(first.status).toBe(200)
    expect(first.header('X-ID')).toBe('a, b')
    expect(await first.text()).toBe(body)
    const second = await post(http, '/chunked')
    expect(await second.text()).toBe(body)
    const [a, b] = seen.slice(-2)
    expect(b.conn).toBe(a.conn)
  })

  test('a 100 Continue before the answer, its head split across reads, is skipped', async () => {
    answers.set('/continue', (socket) =>
      dribble(socket, [
        'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 20',
        '1 Created\r\ncontent-le',
        'ngth: 5\r\n\r',
        '\nhel',
        'lo',
      ]),
    )
    const response = await post(client(), '/continue')
    expect(response.status).toBe(201)
    expect(await response.text()).toBe('hello')
  })

  test('an answer without a length ends at the close; HTTP/1.0 and `connection: close` are not reused; 204 has no body', async () => {
    answers.set('/until-close', (socket) => {
      void dribble(socket, ['HTTP/1.1 200 OK\r\n\r\npart one, ', 'part two']).then(() =>
        socket.end(),
      )
    })
    answers.set('/http10', (socket) => {
      socket.write('HTTP/1.0 200 OK\r\ncontent-length: 3\r\n\r\nold')
    })
    answers.set('/close', (socket) => {
      socket.write('HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 3\r\n\r\nbye')
    })
    answers.set('/empty', (socket) => {
      socket.write('HTTP/1.1 204 No Content\r\ncontent-length: 0\r\n\r\n')
    })
    const http = client()
    expect(await (await post(http, '/until-close')).text()).toBe('part one, part two')
    expect(await (await post(http, '/http10')).text()).toBe('old')
    expect(await (await post(http, '/close')).text()).toBe('bye')
    const empty = await post(http, '/empty')
    expect(empty.status).toBe(204)
    expect(await empty.text()).toBe('')
    expect(await (await post(http, '/empty')).text()).toBe('')
    const conns = seen.slice(-5).map((s) => s.conn)
    // A new connection after each of the first three; the two 204s share one.
    expect(new Set(conns.slice(0, 4)).size).toBe(4)
    expect(conns[4]).toBe(conns[3])
  })

  test('an answer that breaks off mid-body fails as a closed socket, one that is not HTTP as a protocol error', async () => {
    answers.set('/cut', (socket) => {
      void dribble(socket, ['HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly some']).then(() =>
        socket.end(),
      )
    })
    answers.set('/garbage', (socket) => {
      socket.write('SMTP ready\r\n\r\n')
    })
    const http = client()
    const cut = await post(http, '/cut')
    expect(cut.status).toBe(200)
    const error = await failure(cut.text())
    expect(error?.message).toBe('the upstream closed the connection before its answer was complete')
    expect(isSocketClosed(error)).toBe(true)
    const garbage = await failure(post(http, '/garbage'))
    expect(garbage?.code).toBe('HPE_INVALID')
    expect(garbage?.message).toBe('the upstream sent an answer that is not HTTP/1.x')
  })

  test('header names are read case-blind and trimmed, repeats joined; a header line without a name is a protocol error', async () => {
    answers.set('/heads', (socket) => {
      socket.write(
        'HTTP/1.1 201 Created\r\nX-Limit : 5\r\nx-limit:  7 \r\nContent-Length: 2\r\nRetry-After:3\r\n\r\nok',
      )
    })
    answers.set('/nameless', (socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n: no name\r\n\r\nok')
    })
    answers.set('/colonless', (socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length 2\r\n\r\nok')
    })
    const http = client()
    const heads = await post(http, '/heads')
    expect(heads.status).toBe(201)
    expect(heads.header('X-LIMIT')).toBe('5, 7')
    expect(heads.header('retry-after')).toBe('3')
    expect(await heads.text()).toBe('ok')
    for (const path of ['/nameless', '/colonless']) {
      const refused = await failure(post(http, path))
      expect(refused?.code).toBe('HPE_INVALID')
      expect(refused?.message).toBe('the upstream sent an answer that is not HTTP/1.x')
    }
  })

  test('a header that would split the request is refused before anything is sent; the connection goes on', async () => {
    answers.set('/ok', (socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok')
    })
    const http = client()
    const before = seen.length
    const refused = await failure(post(http, '/ok', { 'x-bad': 'a\r\nx-injected: 1' }))
    expect(refused?.code).toBe('INVALID_ARGUMENT')
    expect(refused?.message).toBe('a header "x-bad" that cannot be sent')
    expect(seen.length).toBe(before)
    expect(await (await post(http, '/ok')).text()).toBe('ok')
  })

  test('an answer that comes before the whole request went out ends the exchange and its connection', async () => {
    // The test server answers once it has read everything; this one answers at the head.
    const early = Bun.listen<{ answered: boolean }>({
      hostname: '127.0.0.1',
      port: 0,
      socket: {
        open(socket) {
          socket.data = { answered: false }
        },
        data(socket, data) {
          if (socket.data.answered || !data.toString('latin1').includes('\r\n\r\n')) return
          socket.data.answered = true
          socket.write('HTTP/1.1 413 Payload Too Large\r\ncontent-length: 8\r\n\r\ntoo big!')
        },
      },
    })
    try {
      const http = createHttpClient(`http://127.0.0.1:${early.port}`, {
        connections: 1,
        connectTimeoutMs: 2_000,
      })
      clients.push(http)
      const big = 'x'.repeat(32 * 1024 * 1024)
      const send = (body: string) =>
        http.request({ method: 'POST', path: '/x', headers: {}, body, signal })
      const first = await send(big)
      expect(first.status).toBe(413)
      expect(await first.text()).toBe('too big!')
      // Had the connection been kept, the rest of the big body would reach the server as the next request.
      const second = await send('{}')
      expect(second.status).toBe(413)
      expect(await second.text()).toBe('too big!')
    } finally {
      early.stop(true)
    }
  })

  test('a connection the server closes while idle leaves the pool: the next request opens a new one and succeeds', async () => {
    answers.set('/then-idle-close', (socket) => {
      socket.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok')
      setTimeout(() => socket.end(), 20)
    })
    const http = client()
    expect(await (await post(http, '/then-idle-close')).text()).toBe('ok')
    await Bun.sleep(60)
    expect(await (await post(http, '/ok')).text()).toBe('ok')
    const [a, b] = seen.slice(-2)
    expect(b.conn).not.toBe(a.conn)
  })

  test('a connection idle past the keep-alive timeout the upstream gives, less a second, is not reused', async () => {
    answers.set('/keep-2s', (socket) => {
      socket.write('HTTP/1.1 200 OK\r\nkeep-alive: timeout=2\r\ncontent-length: 2\r\n\r\nok')
    })
    const http = client()
    expect(await (await post(http, '/keep-2s')).text()).toBe('ok')
    await Bun.sleep(300)
    expect(await (await post(http, '/keep-2s')).text()).toBe('ok')
    await Bun.sleep(1_200)
    expect(await (await post(http, '/keep-2s')).text()).toBe('ok')
    const [a, b, c] = seen.slice(-3).map((s) => s.conn)
    expect(b).toBe(a)
    expect(c).not.toBe(b)
  })

  test('a refused connection is a connect failure (the replica is down)', async () => {
    const closed = Bun.listen({ hostname: '127.0.0.1', port: 0, socket: { data() {} } })
    const port = closed.port
    closed.stop(true)
    const error = await failure(post(client(`http://127.0.0.1:${port}`), '/x'))
    expect(error?.code).toBe('ECONNREFUSED')
    expect(isConnectFailure(error)).toBe(true)
  })

  test('a streamed body read slowly arrives whole, in order', async () => {
    const chunk = (i: number) =>
      `${String(i).padStart(6, '0')}${String.fromCharCode(97 + (i % 26)).repeat(4090)}`
    answers.set('/big', async (socket) => {
      socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n')
      for (let i = 0; i < 400; i++) {
        const part = chunk(i)
        socket.write(`${part.length.toString(16)}\r\n${part}\r\n`)
        if (i % 50 === 0) await Bun.sleep(1)
      }
      socket.write('0\r\n\r\n')
    })
    const response = await post(client(), '/big', { accept: 'text/event-stream' })
    let text = ''
    for await (const part of response.chunks()) {
      text += Buffer.from(part).toString('latin1')
      await Bun.sleep(0)
    }
    // Every byte as sent: the chunks kept unread across reads were not overwritten by later ones.
    expect(text.length).toBe(400 * 4096)
    expect(text === Array.from({ length: 400 }, (_, i) => chunk(i)).join('')).toBe(true)
  })
})

describe('the upstream transport over TLS', () => {
  const dir = mkdtempSync(join(tmpdir(), 'mg-tls-'))
  const cert = join(dir, 'cert.pem')
  const key = join(dir, 'key.pem')
  let tls: ReturnType<typeof Bun.serve>
  const received: string[] = []

  beforeAll(() => {
    const made = Bun.spawnSync(
      [
        'openssl',
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        key,
        '-out',
        cert,
        '-days',
        '1',
        '-subj',
        '/CN=localhost',
        '-addext',
        'subjectAltName=IP:127.0.0.1',
      ],
      { stderr: 'pipe' },
    )
    expect(made.exitCode).toBe(0)
    tls = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      tls: { cert: Bun.file(cert), key: Bun.file(key) },
      async fetch(request) {
        received.push(request.headers.get('authorization') ?? '')
        return Response.json({ body: await request.text() })
      },
    })
  })
  afterAll(() => tls.stop(true))

  /** createHttpClient in a process of its own, trusting `ca` (or only the system's roots). */
  async function callFrom(ca: string | null) {
    const script = join(dir, 'call.ts')
    writeFileSync(
      script,
      `import { createHttpClient } from ${JSON.stringify(join(import.meta.dir, '../../providers/http-client.ts'))}
const http = createHttpClient('https://127.0.0.1:${tls.port}/v1', { connections: 1, connectTimeoutMs: 2000 })
const signal = new AbortController().signal
const out = []
for (let i = 0; i < 2; i++) {
  try {
    const response = await http.request({ method: 'POST', path: '/chat', headers: { authorization: 'Bearer sk-test' }, body: '{"n":' + i + '}', signal })
    out.push({ status: response.status, body: await response.text() })
  } catch (error) { out.push({ code: error.code, message: error.message }) }
}
console.log(JSON.stringify(out))
process.exit(0)`,
    )
    const env: Record<string, string> = { ...process.env } as Record<string, string>
    if (ca) env.NODE_EXTRA_CA_CERTS = ca
    else delete env.NODE_EXTRA_CA_CERTS
    const run = Bun.spawn([process.execPath, script], { env, stdout: 'pipe' })
    return JSON.parse(await new Response(run.stdout).text())
  }

  test('a certificate that verifies carries the requests over one connection', async () => {
    received.length = 0
    expect(await callFrom(cert)).toEqual([
      { status: 200, body: '{"body":"{\\"n\\":0}"}' },
      { status: 200, body: '{"body":"{\\"n\\":1}"}' },
    ])
    expect(received).toEqual(['Bearer sk-test', 'Bearer sk-test'])
  })

  test('one that does not is refused with its reason, and the server never sees the request or its key', async () => {
    received.length = 0
    const refusal = {
      code: 'DEPTH_ZERO_SELF_SIGNED_CERT',
      message: 'TLS with the upstream failed: self signed certificate',
    }
    expect(await callFrom(null)).toEqual([refusal, refusal])
    expect(received).toEqual([])
  })
})
