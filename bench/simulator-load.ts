/**
 * A closed-loop load generator for the simulator: `bun bench/simulator-load.ts --url
 * http://127.0.0.1:8090 --concurrency 256 --seconds 5 --client undici|fetch`. Prints requests/s
 * latency percentiles and this process's CPU per request. Used to size the simulator and to choose
 * the gateway's HTTP client: `--client http-client` is the gateway's own (providers/http-client.ts),
 * `undici` its Pool, `dispatch` undici's dispatch API, `fetch` Bun's; `--client adapter` goes
 * through the OpenAI provider adapter, as the dispatcher does.
 */
import { parseArgs } from 'node:util'
import { Pool } from 'undici/index.js'
import { createHttpClient } from '../providers/http-client.ts'
import { createProvider } from '../providers/index.ts'

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8090' },
    concurrency: { type: 'string', default: '256' },
    connections: { type: 'string' },
    seconds: { type: 'string', default: '5' },
    client: { type: 'string', default: 'undici' },
  },
})

const url = new URL(values.url)
if (url.hostname !== '127.0.0.1' && url.hostname !== 'localhost') {
  throw new Error('the load generator only targets 127.0.0.1')
}
const concurrency = Number(values.concurrency)
const connections = Number(values.connections ?? values.concurrency)
const seconds = Math.min(60, Number(values.seconds))
const client = values.client
const body = JSON.stringify({
  model: 'sim-chat',
  messages: [{ role: 'user', content: 'Summarise the ticket about the broken printer.' }],
  max_tokens: 16,
})
const headers = { 'content-type': 'application/json' }
const pool = new Pool(url.origin, { connections, keepAliveTimeout: 30_000 })
const adapter = createProvider({
  name: 'load',
  kind: 'openai',
  baseUrls: [`${url.origin}/v1`],
  apiKey: null,
  timeoutMs: 30_000,
  connections,
})
const parsedBody = JSON.parse(body) as Record<string, unknown>
const httpClient = createHttpClient(`${url.origin}/v1`, { connections, connectTimeoutMs: 5_000 })
const signal = new AbortController().signal

async function once(): Promise<boolean> {
  if (client === 'adapter') {
    return (
      await adapter.send({ endpoint: 'chat', body: parsedBody, model: String(parsedBody.model) })
    ).ok
  }
  if (client === 'dispatch') {
    return new Promise<boolean>((resolve, reject) => {
      let status = 0
      const chunks: Buffer[] = []
      pool.dispatch(
        { path: '/v1/chat/completions', method: 'POST', headers, body },
        {
          onRequestStart() {},
          onResponseStart(_c: unknown, statusCode: number) {
            status = statusCode
          },
          onResponseData(_c: unknown, chunk: Buffer) {
            chunks.push(chunk)
          },
          onResponseEnd() {
            JSON.parse(Buffer.concat(chunks).toString('utf8'))
            resolve(status === 200)
          },
          onResponseError(_c: unknown, error: Error) {
            reject(error)
          },
        },
      )
    })
  }
  if (client === 'http-client') {
    const response = await httpClient.request({
      method: 'POST',
      path: '/chat/completions',
      headers,
      body,
      signal,
    })
    JSON.parse(await response.text())
    return response.status === 200
  }
  if (client === 'fetch') {
    const response = await fetch(`${url.origin}/v1/chat/completions`, {
      method: 'POST',
      headers,
      body,
    })
    await response.json()
    return response.status === 200
  }
  const response = await pool.request({
    path: '/v1/chat/completions',
    method: 'POST',
    headers,
    body,
  })
  await response.body.json()
  return response.statusCode === 200
}

const latencies: number[] = []
let ok = 0
let failed = 0
const endAt = performance.now() + seconds * 1000
// Warm-up: one second not counted, so connection set-up does not skew the figure.
const countFrom = performance.now() + 1000

async function worker(): Promise<void> {
  while (performance.now() < endAt) {
    const start = performance.now()
    let success = false
    try {
      success = await once()
    } catch {
      success = false
    }
    if (start < countFrom) continue
    latencies.push(performance.now() - start)
    if (success) ok++
    else failed++
  }
}

const cpuFrom = process.cpuUsage()
await Promise.all(Array.from({ length: concurrency }, worker))
const cpu = process.cpuUsage(cpuFrom)
await Promise.all([pool.close(), adapter.close(), httpClient.close()])
latencies.sort((a, b) => a - b)
const pick = (q: number) => latencies[Math.floor(q * (latencies.length - 1))]?.toFixed(1)
const measured = seconds - 1
console.log(
  `${client} concurrency=${concurrency} connections=${connections}: ` +
    `${Math.round(ok / measured)} ok/s, ${failed} failed, ` +
    `p50 ${pick(0.5)} ms, p99 ${pick(0.99)} ms, ` +
    `${Math.round((cpu.user + cpu.system) / (ok + failed))} µs CPU/request (warm-up included)`,
)
