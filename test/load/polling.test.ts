/**
 * 500 concurrent clients poll GET /v1/batches/{id} while the batch runs and download the results
 * of a finished batch, for 60 s, against the gateway as its own process: no answer other than 200
 * (or 429), no failed request, and the process's memory stays flat (RSS from /proc/<pid>/status).
 * The downloads are of a finished batch so that each is the same size all along: the results of
 * the running batch grow with it, and so would the memory the downloads in flight take, leak or
 * no leak.
 */
import { expect, test } from 'bun:test'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator } from '../../src/simulator/server.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import { ADMIN_TOKEN, chatLine, jsonl } from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess } from '../helpers/process-gateway.ts'
import { waitFor } from '../helpers/wait.ts'

const CLIENTS = 500
const DURATION_MS = 60_000
/** Each client downloads the results on one poll in this many. */
const DOWNLOAD_EVERY = 10
/** A line takes 400 ms upstream, 8 at a time: ~20 lines/s, so 1,500 lines outlast the minute. */
const LINES = 1_500
/** The finished batch whose results are downloaded: about 200 KiB each time. */
const FINISHED_LINES = 500
const MIB = 1024 * 1024
/**
 * The gateway runs with MIMALLOC_PURGE_DELAY=-1 (as `npm start` starts it; docs/configuration.md): the
 * allocator keeps freed pages, so RSS rises to the peak working set of 500 concurrent downloads
 * and stays there. A leak shows as growth that goes on: the second half of the run must add
 * (almost) nothing to the first.
 */
const RSS_GROWTH_LIMIT = 200 * MIB
const RSS_SECOND_HALF_LIMIT = 24 * MIB

const rssOf = (pid: number) => {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))
  return Number(match![1]) * 1024
}

test(`${CLIENTS} clients poll and download results for ${DURATION_MS / 1000} s: only 200/429, memory flat`, async () => {
  // No latency while the finished batch runs; the running batch's lines then take 400 ms.
  const sim = await startSimulator({ latencyMs: 0 })
  const env = {
    PORT: String(freePort()),
    HOST: '127.0.0.1',
    MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-load-')),
    MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 8 })),
    MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
    MULTIGRID_POLL_MS: '50',
    LOG_LEVEL: 'warn',
  }
  const gateway = await spawnGatewayProcess(env)
  try {
    const admin = (path: string, body: unknown) =>
      fetch(`${gateway.url}/admin/v1${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    const account = (await (
      await admin('/accounts', { name: 'load', credit_usd: '10' })
    ).json()) as { id: string }
    const { key } = (await (
      await admin(`/accounts/${account.id}/keys`, { rate_limit_per_minute: 10_000_000 })
    ).json()) as { key: string }
    const headers = { authorization: `Bearer ${key}` }
    const submit = async (count: number, prefix: string) => {
      const lines = Array.from({ length: count }, (_, i) =>
        chatLine(`${prefix}-${i}`, `${prefix} line ${i}`),
      )
      const created = await fetch(`${gateway.url}/v1/batches`, {
        method: 'POST',
        headers,
        body: jsonl(lines),
      })
      expect(created.status).toBe(201)
      return ((await created.json()) as { id: string }).id
    }
    const finishedId = await submit(FINISHED_LINES, 'done')
    await waitFor(
      'the batch to download to complete',
      async () => {
        const batch = (await (
          await fetch(`${gateway.url}/v1/batches/${finishedId}`, { headers })
        ).json()) as { status: string }
        return batch.status === 'completed'
      },
      60_000,
      100,
    )
    sim.configure({ latencyMs: 400 })
    const id = await submit(LINES, 'load')

    const statuses: Record<string, number> = {}
    const failures: string[] = []
    const latencies: number[] = []
    let downloads = 0
    let downloadedBytes = 0
    const rssStart = rssOf(gateway.pid)
    let rssPeak = rssStart
    let rssHalf = 0
    const sampler = setInterval(() => {
      const rss = rssOf(gateway.pid)
      rssPeak = Math.max(rssPeak, rss)
      if (rssHalf === 0 && Date.now() >= deadline - DURATION_MS / 2) rssHalf = rss
    }, 1_000)
    const deadline = Date.now() + DURATION_MS

    async function client(index: number) {
      for (let poll = index % DOWNLOAD_EVERY; Date.now() < deadline; poll++) {
        const download = poll % DOWNLOAD_EVERY === 0
        const path = download ? `/v1/batches/${finishedId}/results` : `/v1/batches/${id}`
        const started = performance.now()
        try {
          const response = await fetch(`${gateway.url}${path}`, {
            headers,
            signal: AbortSignal.timeout(30_000),
          })
          const body = await response.arrayBuffer()
          latencies.push(performance.now() - started)
          statuses[response.status] = (statuses[response.status] ?? 0) + 1
          if (response.status !== 200 && response.status !== 429)
            failures.push(`${path}: ${response.status}`)
          if (download && response.status === 200) {
            downloads++
            downloadedBytes += body.byteLength
          }
        } catch (error) {
          failures.push(`${path}: ${(error as Error).message}`)
        }
        // A poll loop's pause, jittered so the clients do not march in step.
        await Bun.sleep(50 + Math.random() * 100)
      }
    }

    const runStarted = Date.now()
    await Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i)))
    const seconds = (Date.now() - runStarted) / 1000
    clearInterval(sampler)
    await Bun.sleep(1_000)
    const rssEnd = rssOf(gateway.pid)

    const batch = (await (await fetch(`${gateway.url}/v1/batches/${id}`, { headers })).json()) as {
      status: string
      request_counts: Record<string, number>
    }
    const requests = Object.values(statuses).reduce((a, b) => a + b, 0)
    latencies.sort((a, b) => a - b)
    const pct = (p: number) =>
      latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * p))].toFixed(0)
    console.log(
      `load: ${CLIENTS} clients for ${seconds.toFixed(1)} s: ${requests} requests (${(requests / seconds).toFixed(0)}/s), ` +
        `statuses ${JSON.stringify(statuses)}, ${failures.length} failures, latency p50 ${pct(0.5)} ms p99 ${pct(0.99)} ms; ` +
        `${downloads} result downloads (${(downloadedBytes / MIB).toFixed(0)} MiB); ` +
        `gateway RSS ${(rssStart / MIB).toFixed(0)} → ${(rssHalf / MIB).toFixed(0)} at half time → ${(rssEnd / MIB).toFixed(0)} MiB (peak ${(rssPeak / MIB).toFixed(0)}); ` +
        `${batch.request_counts.succeeded} of ${LINES} lines done meanwhile`,
    )
    expect(failures.slice(0, 10)).toEqual([])
    expect(requests).toBeGreaterThan(CLIENTS * 10)
    expect(downloads).toBeGreaterThan(CLIENTS)
    // The batch ran the whole time, and was still running at the end.
    expect(batch.request_counts.succeeded).toBeGreaterThan(0)
    expect(batch.status).toBe('in_progress')
    expect(rssEnd - rssStart).toBeLessThan(RSS_GROWTH_LIMIT)
    expect(rssHalf).toBeGreaterThan(0)
    expect(rssEnd - rssHalf).toBeLessThan(RSS_SECOND_HALF_LIMIT)
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
  } finally {
    await gateway.kill('SIGTERM')
    await sim.stop()
  }
}, 150_000)
