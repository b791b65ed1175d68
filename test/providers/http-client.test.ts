/**
 * The upstream connections (providers/http-client.ts, an undici Pool per replica): at most
 * `connections` requests at once, the rest in order; a connection the server closed is replaced;
 * closing the client fails what is on it and what waits. Against a real HTTP server on 127.0.0.1.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
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
      return new Response(JSON.stringify({ path }), { headers })
    },
  })
})
afterAll(() => server.stop(true))

const clients: HttpClient[] = []
function client(connections: number): HttpClient {
  const made = createHttpClient(`http://127.0.0.1:${server.port}`, { connections, connectTimeoutMs: 2_000 })
  clients.push(made)
  return made
}
afterAll(() => Promise.all(clients.map((c) => c.close())))

const signal = new AbortController().signal
const post = (http: HttpClient, path: string) =>
  http.request({ method: 'POST', path, headers: { 'content-type': 'application/json' }, body: '{}', signal }).then(async (response) => ({ status: response.status, body: JSON.parse(await response.text()) }))

describe('upstream connections', () => {
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

  test('a server that closes the connection after its answer: the next request goes out on a new one', async () => {
    const http = client(1)
    seen = []
    expect((await post(http, '/close-first')).status).toBe(200)
    expect(await post(http, '/after-close')).toEqual({ status: 200, body: { path: '/after-close' } })
    expect(seen.map((s) => s.path)).toEqual(['/close-first', '/after-close'])
    expect(seen[1].port).not.toBe(seen[0].port)
  })

  test('closing fails the requests on its connections and those still waiting, and any sent after', async () => {
    const http = createHttpClient(`http://127.0.0.1:${server.port}`, { connections: 1, connectTimeoutMs: 2_000 })
    const failure = (path: string) => post(http, path).then(() => null, (error: Error) => error.message)
    const running = failure('/slow-running')
    const waiting = failure('/slow-waiting')
    await Bun.sleep(10)
    await http.close()
    expect(await running).toEqual(expect.any(String))
    expect(await waiting).toEqual(expect.any(String))
    expect(await failure('/after')).toEqual(expect.any(String))
  })
})
