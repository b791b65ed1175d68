/**
 * Memory under big bodies sent to routes that must not read them: a gateway in its own process
 * (the default limits, as `npm start` has them) gets four 150 MB posts at once — sign-in
 * declared and chunked, the admin API with a wrong token, a live call — each sent whole by a
 * client that does not stop at the answer. Each is refused at once, and the process's RSS grows
 * by little: the bodies are discarded as they arrive, never held.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, readFileSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import { ADMIN_TOKEN } from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess, type GatewayProcess } from '../helpers/process-gateway.ts'
import { rawRequest } from '../helpers/raw-http.ts'

const TOTAL = 150 * 1024 * 1024

let gateway: GatewayProcess
let key = ''

beforeAll(async () => {
  gateway = await spawnGatewayProcess({
    PORT: String(freePort()),
    HOST: '127.0.0.1',
    MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-data-')),
    MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
    MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
    MULTIGRID_DISPATCH: '0',
    LOG_LEVEL: 'warn',
  })
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }
  const account = (await (
    await fetch(`${gateway.url}/admin/v1/accounts`, {
      method: 'POST',
      headers: admin,
      body: '{"name":"m","credit_usd":"1"}',
    })
  ).json()) as { id: string }
  key = (
    (await (
      await fetch(`${gateway.url}/admin/v1/accounts/${account.id}/keys`, {
        method: 'POST',
        headers: admin,
        body: '{}',
      })
    ).json()) as { key: string }
  ).key
})
afterAll(async () => {
  await gateway.kill('SIGKILL')
})

const rssMiB = () =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${gateway.pid}/status`, 'utf8'))![1]) / 1024

/** Sends the whole body whatever the server answers meanwhile; resolves with the status line. */
function sendWhole(
  path: string,
  headers: Record<string, string>,
  chunked: boolean,
): Promise<number | null> {
  const { port } = new URL(gateway.url)
  const piece = Buffer.alloc(1024 * 1024, 0x61)
  const framed = chunked
    ? Buffer.concat([
        Buffer.from(`${piece.byteLength.toString(16)}\r\n`),
        piece,
        Buffer.from('\r\n'),
      ])
    : piece
  return new Promise((resolve) => {
    const socket = connect(Number(port), '127.0.0.1')
    let answer = ''
    let sent = 0
    const done = () => {
      clearTimeout(timer)
      socket.destroy()
      const status = /^HTTP\/1\.1 (\d{3})/.exec(answer)
      resolve(status ? Number(status[1]) : null)
    }
    const timer = setTimeout(done, 60_000)
    socket.on('data', (data) => {
      answer += data.toString('latin1')
    })
    socket.on('error', done)
    socket.on('close', done)
    const pump = () => {
      while (sent < TOTAL) {
        sent += piece.byteLength
        if (!socket.write(framed)) return void socket.once('drain', pump)
      }
      socket.end(chunked ? '0\r\n\r\n' : '')
      // Whatever is left to read arrives before the server's idle timeout closes the connection.
      setTimeout(done, 1_000)
    }
    socket.on('connect', () => {
      const head = Object.entries({
        host: `127.0.0.1:${port}`,
        ...headers,
        ...(chunked ? { 'transfer-encoding': 'chunked' } : { 'content-length': String(TOTAL) }),
      })
      socket.write(
        `POST ${path} HTTP/1.1\r\n${head.map(([n, v]) => `${n}: ${v}\r\n`).join('')}\r\n`,
      )
      pump()
    })
  })
}

test('four 150 MB posts at once to routes that must not read them: refused, and RSS grows by little', async () => {
  // Warm up the routes involved, so what they allocate once is in the baseline.
  for (let i = 0; i < 3; i++) {
    await fetch(`${gateway.url}/dashboard/sign-in`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'key=mg_x',
    })
    await fetch(`${gateway.url}/admin/v1/accounts`, {
      method: 'POST',
      headers: { authorization: 'Bearer wrong' },
      body: '{}',
    })
  }
  const before = rssMiB()
  const form = { 'content-type': 'application/x-www-form-urlencoded' }
  const started = performance.now()
  const statuses = await Promise.all([
    sendWhole('/dashboard/sign-in', form, false),
    sendWhole('/dashboard/sign-in', form, true),
    sendWhole(
      '/admin/v1/accounts',
      { authorization: 'Bearer not-the-admin-token', 'content-type': 'application/json' },
      false,
    ),
    sendWhole(
      '/v1/chat/completions',
      { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      true,
    ),
  ])
  const seconds = (performance.now() - started) / 1000
  const after = rssMiB()
  console.log(
    `4 × 150 MiB in ${seconds.toFixed(1)} s: gateway RSS ${before.toFixed(0)} → ${after.toFixed(0)} MiB`,
  )
  expect(statuses).toEqual([413, 413, 401, 413])
  // Less than one body: a route that buffered any of the four would grow RSS by 150 MiB or more.
  // The runtime's own growth under four such uploads at once is 55–70 MiB on the 2-core box.
  expect(after - before).toBeLessThan(96)
  // The gateway still answers.
  expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
}, 120_000)

test('with the default limits, a post declaring 150 MB and sending 1 KiB is answered at once', async () => {
  const cases: [string, Record<string, string>, number][] = [
    ['/dashboard/sign-in', { 'content-type': 'application/x-www-form-urlencoded' }, 413],
    [
      '/admin/v1/accounts',
      { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      413,
    ],
    [
      '/admin/v1/accounts',
      { authorization: 'Bearer wrong-token-0123456789ab', 'content-type': 'application/json' },
      401,
    ],
    [
      '/v1/chat/completions',
      { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      413,
    ],
    [
      '/openai/v1/batches',
      { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      413,
    ],
  ]
  for (const [path, headers, status] of cases) {
    const answer = await rawRequest(gateway.url, {
      path,
      headers,
      declaredLength: 150_000_000,
      body: new Uint8Array(1024).fill(0x61),
      after: 'leave-open',
      timeoutMs: 3_000,
    })
    expect({ path, status: answer.status }).toEqual({ path, status })
    expect(answer.ms).toBeLessThan(1_000)
  }
}, 30_000)
