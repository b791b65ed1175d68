/**
 * The upstream connections (providers/connection-pool.ts, through createHttpClient): at most
 * `connections` requests at once, the rest in order, and a request started from inside an answer
 * sent on that answer's connection before the event loop turns (undici's own pool waited a turn
 * before reusing a socket). Against a real HTTP server on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { requestSent } from '../../providers/h1-connection.ts'
import { createHttpClient, type HttpClient } from '../../providers/http-client.ts'

let server: ReturnType<typeof Bun.serve>
/** Per request, as the server saw it: path, the client's port, and when it came and went. */
let seen: { path: string; port: number }[] = []
let inFlight = 0
let peak = 0

beforeAll(() => {
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request, srv) {
      const path = new URL(request.url).pathname
      seen.push({ path, port: srv.requestIP(request)!.port })
      inFlight++
      peak = Math.max(peak, inFlight)
      await request.text()
      await Bun.sleep(path.startsWith('/slow') ? 30 : 1)
      inFlight--
      // /close: the server says it closes the connection after this answer.
      const headers: Record<string, string> = { 'content-type': 'application/json' }
      if (path.startsWith('/close')) headers.connection = 'close'
      return new Response(JSON.stringify({ path }), {
        headers,
        status: path.startsWith('/fail') ? 500 : 200,
      })
    },
  })
})
afterAll(() => server.stop(true))

/** What the clients' onAnswered hook runs at the next whole 2xx answer, once (armed by post()). */
let armed: (() => void) | null = null
const clients: HttpClient[] = []
function client(connections: number): HttpClient {
  const onAnswered = () => {
    const next = armed
    armed = null
    next?.()
  }
  const made = createHttpClient(`http://127.0.0.1:${server.port}`, {
    connections,
    connectTimeoutMs: 2_000,
    onAnswered,
  })
  clients.push(made)
  return made
}
afterAll(() => Promise.all(clients.map((c) => c.close())))

const signal = new AbortController().signal
const post = (
  http: HttpClient,
  path: string,
  onAnswered?: () => void,
  headers: Record<string, string> = {},
) => {
  if (onAnswered) armed = onAnswered
  return http
    .request({
      method: 'POST',
      path,
      headers: { 'content-type': 'application/json', ...headers },
      body: '{}',
      signal,
    })
    .then(async (response) => ({
      status: response.status,
      body: JSON.parse(await response.text()),
    }))
}

describe('upstream connections', () => {
  test('a request started from inside an answer goes out on its connection before the event loop turns', async () => {
    const http = client(1)
    await post(http, '/warm') // the connection is open and has been used
    seen = []
    const order: string[] = []
    const onSent = (message: unknown) => order.push(`sent ${(message as { path: string }).path}`)
    requestSent.subscribe(onSent)
    try {
      const second: Promise<unknown>[] = []
      const first = await post(http, '/first', () => {
        setImmediate(() => order.push('next turn'))
        second.push(post(http, '/second'))
      })
      expect(first).toEqual({ status: 200, body: { path: '/first' } })
      expect(second).toHaveLength(1)
      expect(await second[0]).toEqual({ status: 200, body: { path: '/second' } })
    } finally {
      requestSent.unsubscribe(onSent)
    }
    expect(order.slice(0, 3)).toEqual(['sent /first', 'sent /second', 'next turn'])
    expect(seen.map((s) => s.path)).toEqual(['/first', '/second'])
    expect(seen[1].port).toBe(seen[0].port)
  })

  test('the hook runs for a whole 2xx answer to a POST only: not a 5xx, a GET (a probe) or a request for an event stream', async () => {
    const http = client(1)
    let calls = 0
    const count = () => calls++
    expect((await post(http, '/fail', count)).status).toBe(500)
    expect(calls).toBe(0)
    expect((await post(http, '/stream', count, { accept: 'text/event-stream' })).status).toBe(200)
    expect(calls).toBe(0)
    armed = count
    const probe = await http.request({ method: 'GET', path: '/models', headers: {}, signal })
    expect(probe.status).toBe(200)
    await probe.text()
    expect(calls).toBe(0)
    expect((await post(http, '/whole', count)).status).toBe(200)
    expect(calls).toBe(1)
  })

  test('at most `connections` requests at once; the rest wait and go in the order they came', async () => {
    const http = client(2)
    seen = []
    peak = 0
    const paths = Array.from({ length: 7 }, (_, i) => `/slow-${i}`)
    const answers = await Promise.all(paths.map((path) => post(http, path)))
    expect(answers.map((a) => a.body.path)).toEqual(paths)
    expect(peak).toBe(2)
    expect(seen.map((s) => s.path)).toEqual(paths)
    expect(new Set(seen.map((s) => s.port)).size).toBe(2)
  })

  test('a server that closes the connection after its answer: the request handed on goes out on a new one', async () => {
    const http = client(1)
    seen = []
    const handedOn: Promise<{ status: number; body: { path: string } }>[] = []
    const first = await post(http, '/close-first', () => {
      handedOn.push(post(http, '/after-close'))
    })
    expect(first.status).toBe(200)
    expect(handedOn).toHaveLength(1)
    expect(await handedOn[0]).toEqual({ status: 200, body: { path: '/after-close' } })
    expect(seen.map((s) => s.path)).toEqual(['/close-first', '/after-close'])
    expect(seen[1].port).not.toBe(seen[0].port)
  })

  test('closing fails the requests on its connections and those still waiting, and any sent after', async () => {
    const http = createHttpClient(`http://127.0.0.1:${server.port}`, {
      connections: 1,
      connectTimeoutMs: 2_000,
    })
    const failure = (path: string) =>
      post(http, path).then(
        () => null,
        (error: Error) => error.message,
      )
    const running = failure('/slow-running')
    const waiting = failure('/slow-waiting')
    await Bun.sleep(10)
    await http.close()
    expect(await running).toEqual(expect.any(String))
    expect(await waiting).toBe('the connection pool is closed')
    expect(await failure('/after')).toBe('the connection pool is closed')
  })
})
