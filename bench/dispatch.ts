/**
 * Dispatch: a chat batch (the standard 50,000-line file) through a gateway process against the
 * upstream simulator in a process of its own, in lines/s from the POST to `completed`, beside
 * the raw limits of the same work measured in the same run:
 * - the ideal, concurrency ÷ latency (256 / 0.05 s = 5,120 lines/s);
 * - the simulator's own capacity: the gateway's own HTTP client alone (providers/http-client.ts), the same concurrency, the same bodies,
 *   straight to the simulator.
 * Also: the gateway's CPU time per line (from /proc), and Little's law on what the gateway
 * recorded — mean lines in flight = rate × mean upstream latency — to tell slots left idle
 * apart from answers read late.
 *
 *   bun bench/dispatch.ts [--lines 50000] [--concurrency 256] [--latency-ms 50] [--runs 3]
 *     [--store sqlite|postgres] [--poll-ms 10] [--sim-requests 20000] [--warmup 10000] [--profile]
 *
 * Each run starts a fresh gateway and sends it a warm-up batch first (lines from the end of the
 * file), so the figure is that of a gateway that has been running: after 2,000 lines the JIT was
 * still compiling the hot paths through the measured batch (about 1 s of a compiler thread's CPU
 * per run, against 0.45 s after 12,000).
 *
 * --profile writes the gateway's CPU profile (Bun's --cpu-prof, plus its markdown summary) to
 * bench/out/prof/; summarise it with `bun bench/prof-summary.ts <file.cpuprofile>`.
 */
import { Database } from 'bun:sqlite'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { createHttpClient } from '../providers/http-client.ts'
import {
  benchSchema,
  cpuBetween,
  cpuByName,
  cpuMs,
  machineTicks,
  memoryOf,
  schedMs,
  median,
  newKey,
  handOnLoop,
  profileArgs,
  quantile,
  randomPort,
  spawnGateway,
  spawnSimulator,
  standardFile,
  threadCpuMs,
  threadCpuMsBetween,
  benchCatalog,
  BENCH_MODEL,
} from './lib.ts'

const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: '50000' },
    concurrency: { type: 'string', default: '256' },
    'latency-ms': { type: 'string', default: '50' },
    runs: { type: 'string', default: '3' },
    store: { type: 'string', default: 'sqlite' },
    'poll-ms': { type: 'string', default: '10' },
    'sim-requests': { type: 'string', default: '20000' },
    warmup: { type: 'string', default: '10000' },
    profile: { type: 'boolean', default: false },
  },
})
const lineCount = Number(values.lines)
const concurrency = Number(values.concurrency)
const latencyMs = Number(values['latency-ms'])
const runs = Number(values.runs)
const simRequests = Number(values['sim-requests'])
const warmupLines = Math.min(Number(values.warmup), lineCount)
if (values.store !== 'sqlite' && values.store !== 'postgres')
  throw new Error('--store is sqlite or postgres')
if (!(lineCount >= 1 && lineCount <= 50_000)) throw new Error('--lines is 1 to 50,000 (one batch)')

const MODEL = BENCH_MODEL
const allLines = (await Bun.file(await standardFile(MODEL)).text()).split('\n').filter(Boolean)
const fileOf = (from: number, count: number) => allLines.slice(from, from + count).join('\n') + '\n'
const measured = fileOf(0, lineCount)
// The warm-up batch takes lines from the end of the file, so its prompts differ from the measured ones.
const warmup = fileOf(allLines.length - warmupLines, warmupLines)
// The raw client sends the same request bodies the gateway sends upstream.
const rawBodies = allLines.slice(0, Math.min(simRequests, allLines.length)).map((line) => {
  const { body } = JSON.parse(line) as { body: Record<string, unknown> }
  return JSON.stringify({ ...body, model: 'sim-chat' })
})

const simulator = await spawnSimulator(['--latency-ms', String(latencyMs)], randomPort(19_000))
const catalog = benchCatalog(`${simulator.url}/v1`, concurrency)

interface RunResult {
  // The plain client straight to the simulator.
  rawRate: number
  rawMeanMs: number
  rawSimUs: number
  rawClientUs: number
  rawMachineBusy: number
  // The gateway.
  ingestMs: number
  /** The same file's dry run (upload, validation and quote, nothing stored), just after. */
  dryRunMs: number
  totalRate: number
  dispatchRate: number
  steadyRate: number
  /** 201 → the first 5% of lines done, and the last 5% → completed, in ms. */
  rampMs: number
  tailMs: number
  /** 201 → the simulator's first request, and its `concurrency`-th; its last request → completed. */
  firstSendMs: number
  fullMs: number
  lastSendToDoneMs: number
  cpuUsPerLine: number
  mainUsPerLine: number
  cpuShare: number
  mainShare: number
  meanLatencyMs: number
  p50LatencyMs: number
  p99LatencyMs: number
  retried: number
  failed: number
  peakInFlight: number
  threads: Map<string, number>
  /** The gateway's resident memory at the end of the run and its peak, in bytes. */
  rss: number
  peakRss: number
  // The rest of the box while the gateway ran.
  simUsPerLine: number
  postgresUsPerLine: number
  machineBusy: number
  gatewayWaitShare: number
  simWaitShare: number
}

/**
 * The simulator alone: a plain client, `concurrency` in flight, `simRequests` requests. Each
 * request starts the next from inside its answer (the client's onAnswered hook), as the
 * gateway's provider slots do, so that it takes the connection just freed at once
 * (providers/connection-pool.ts).
 */
async function simulatorCapacity(): Promise<{
  rate: number
  meanMs: number
  simUs: number
  clientUs: number
  machineBusy: number
}> {
  // The gateway's own HTTP client module (its own HTTP/1.1 transport underneath), nothing else around it.
  // The hook does not say whose answer arrived: it hands on for the oldest request not yet handed on.
  const handOns: (() => void)[] = []
  const client = createHttpClient(`${simulator.url}/v1`, {
    connections: concurrency,
    connectTimeoutMs: 10_000,
    onAnswered: () => handOns.shift()?.(),
  })
  const headers = { 'content-type': 'application/json' }
  const signal = new AbortController().signal
  const loop = (total: number, maxMs: number) =>
    handOnLoop({ concurrency, total, maxMs }, async (i, onAnswered) => {
      handOns.push(onAnswered)
      const response = await client.request({
        path: '/chat/completions',
        method: 'POST',
        headers,
        body: rawBodies[i % rawBodies.length],
        signal,
      })
      JSON.parse(await response.text())
      return response.status === 200
    })
  // Warm-up: open the connections and warm the JIT on both sides.
  await loop(concurrency * 4, 30_000)
  const simBefore = await cpuMs(simulator.pid)
  const machineBefore = await machineTicks()
  const clientBefore = process.cpuUsage()
  const result = await loop(simRequests, 120_000)
  const clientCpu = process.cpuUsage(clientBefore)
  const simCpu = (await cpuMs(simulator.pid)) - simBefore
  const machineAfter = await machineTicks()
  await client.close()
  if (result.failed > 0) throw new Error(`the raw client saw ${result.failed} failures`)
  const mean = result.latencies.reduce((a, b) => a + b, 0) / result.latencies.length
  const machineBusy =
    (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total)
  return {
    rate: result.ok / (result.elapsedMs / 1000),
    meanMs: mean,
    simUs: (simCpu * 1000) / result.ok,
    clientUs: (clientCpu.user + clientCpu.system) / result.ok,
    machineBusy,
  }
}

type Counts = {
  total: number
  pending: number
  running: number
  succeeded: number
  failed: number
  cancelled: number
  expired: number
}

/** POSTs `body` as a batch file, with `query` ("" or "?…"), as a client would. */
const postFile = (url: string, key: string, body: string, query = '') =>
  fetch(`${url}/v1/batches${query}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/jsonl' },
    body,
  })

/**
 * The measured file's dry run: upload, validation and quote, the part of ingest that must end
 * before a line may run (a file with a bad last line costs nothing); the rest is the store's.
 */
async function dryRun(url: string, key: string, body: string): Promise<number> {
  const t0 = performance.now()
  const response = await postFile(url, key, body, '?dry_run=true')
  await response.arrayBuffer()
  if (response.status !== 200) throw new Error(`the dry run answered ${response.status}`)
  return performance.now() - t0
}

async function submit(url: string, key: string, body: string): Promise<string> {
  const response = await postFile(url, key, body)
  if (response.status !== 201)
    throw new Error(`submit answered ${response.status}: ${(await response.text()).slice(0, 300)}`)
  return ((await response.json()) as { id: string }).id
}

/**
 * Polls every 50 ms until the batch ends (a poll is a cheap GET; a coarser one would add up to its
 * interval to the measured time); returns each poll's time and finished-line count.
 */
async function waitDone(
  url: string,
  key: string,
  id: string,
  maxMs: number,
  onPoll?: (done: number) => void,
) {
  const polls: { t: number; done: number }[] = []
  const endAt = performance.now() + maxMs
  while (performance.now() < endAt) {
    const response = await fetch(`${url}/v1/batches/${id}`, {
      headers: { authorization: `Bearer ${key}` },
    })
    if (response.status !== 200) {
      // The store was away (another user of a shared PostgreSQL restarting it): say so, go on.
      console.error(`poll answered ${response.status}; this run's figure includes the outage`)
      await response.arrayBuffer()
      await Bun.sleep(200)
      continue
    }
    const batch = (await response.json()) as { status: string; request_counts: Counts }
    const c = batch.request_counts
    polls.push({ t: performance.now(), done: c.succeeded + c.failed + c.cancelled + c.expired })
    onPoll?.(polls.at(-1)!.done)
    if (!['validating', 'in_progress', 'finalizing', 'cancelling'].includes(batch.status))
      return { status: batch.status, counts: c, polls }
    await Bun.sleep(50)
  }
  throw new Error(`batch ${id} did not finish within ${maxMs} ms`)
}

/** The upstream latency and attempts the gateway recorded for each line. */
async function recorded(
  env: Record<string, string>,
  batchId: string,
): Promise<{ latencies: number[]; attempts: number }> {
  let rows: { latency_ms: number; attempts: number }[]
  if (env.DATABASE_URL) {
    const { default: postgres } = await import('postgres')
    const sql = postgres(env.DATABASE_URL, { max: 1, onnotice: () => {} })
    rows = (await sql`SELECT latency_ms, attempts FROM lines WHERE batch_id = ${batchId}`).map(
      (row) => ({ latency_ms: Number(row.latency_ms), attempts: Number(row.attempts) }),
    )
    await sql.end()
  } else {
    const db = new Database(join(env.MULTIGRID_DATA_DIR, 'multigrid.sqlite'), { readonly: true })
    rows = db
      .query<{ latency_ms: number; attempts: number }, [string]>(
        'SELECT latency_ms, attempts FROM lines WHERE batch_id = ?',
      )
      .all(batchId)
    db.close()
  }
  const latencies = rows.map((row) => row.latency_ms).sort((a, b) => a - b)
  return { latencies, attempts: rows.reduce((sum, row) => sum + row.attempts, 0) }
}

/** The simulator's latest arrival times (ms since the epoch), oldest first. */
const simArrivals = async () =>
  ((await (await fetch(`${simulator.url}/sim/stats`)).json()) as { arrivals: number[] }).arrivals

async function oneRun(run: number): Promise<RunResult> {
  const raw = await simulatorCapacity()

  const env: Record<string, string> = {
    MULTIGRID_CONFIG: catalog,
    MULTIGRID_POLL_MS: String(values['poll-ms']),
    MULTIGRID_DEFAULT_MAX_OPEN_BATCHES: '1000',
  }
  const schema = values.store === 'postgres' ? await benchSchema() : null
  if (schema) env.DATABASE_URL = schema.url
  const bunArgs = values.profile ? profileArgs(`dispatch-${values.store}-run${run}`) : []
  const gateway = await spawnGateway(env, randomPort(18_900), bunArgs)
  try {
    const key = await newKey(gateway.url)
    const maxMs = 60_000 + (lineCount / 100) * 1000 // 100 lines/s at worst, plus a minute
    // Warm-up batch: JIT, upstream connections, store caches.
    const warm = await waitDone(gateway.url, key, await submit(gateway.url, key, warmup), maxMs)
    if (warm.status !== 'completed') throw new Error(`warm-up batch ended ${warm.status}`)

    await fetch(`${simulator.url}/sim/reset`, { method: 'POST' })
    const cpuBefore = await cpuMs(gateway.pid)
    const threadsBefore = await threadCpuMs(gateway.pid)
    const simBefore = await cpuMs(simulator.pid)
    const machineBefore = await machineTicks()
    const gatewaySchedBefore = await schedMs(gateway.pid)
    const simSchedBefore = await schedMs(simulator.pid)
    const postgresBefore = schema ? await cpuByName('postgres') : null
    const t0 = performance.now()
    const id = await submit(gateway.url, key, measured)
    const t1 = performance.now()
    const created = Date.now()
    // The simulator keeps the latest 10,000 arrivals: the first ones are read a few waves in.
    let early: Promise<number[]> | null = null
    const done = await waitDone(gateway.url, key, id, maxMs, (count) => {
      if (count >= concurrency * 2 && !early) early = simArrivals()
    })
    const t2 = done.polls.at(-1)!.t
    const completedAt = Date.now() - (performance.now() - t2)
    const firstArrivals = (await (early as Promise<number[]> | null)) ?? []
    // Read late (the simulator's ring had turned over) or never (a batch of fewer lines): no
    // figure rather than a wrong one.
    const rampRead = firstArrivals.length > 0 && firstArrivals.length < 10_000
    if (!rampRead)
      console.error('the first upstream requests were not read in time: no ramp figure')
    const lastArrival = (await simArrivals()).at(-1) ?? NaN
    const cpuAfter = await cpuMs(gateway.pid)
    const threadsAfter = await threadCpuMs(gateway.pid)
    const simCpu = (await cpuMs(simulator.pid)) - simBefore
    const machineAfter = await machineTicks()
    const gatewayWait = (await schedMs(gateway.pid)).waitMs - gatewaySchedBefore.waitMs
    const simWait = (await schedMs(simulator.pid)).waitMs - simSchedBefore.waitMs
    const postgresCpu = postgresBefore ? cpuBetween(postgresBefore, await cpuByName('postgres')) : 0
    const stats = (await (await fetch(`${simulator.url}/sim/stats`)).json()) as {
      peakInFlight: number
    }
    if (done.status !== 'completed')
      throw new Error(`batch ended ${done.status}: ${JSON.stringify(done.counts)}`)

    // Steady state: between the first polls past 10% and past 90% of the lines.
    const first = done.polls.find((p) => p.done >= lineCount * 0.1)!
    const last = done.polls.find((p) => p.done >= lineCount * 0.9)!
    const steadyRate =
      last.t > first.t ? ((last.done - first.done) / (last.t - first.t)) * 1000 : NaN
    const rampEnd = done.polls.find((p) => p.done >= lineCount * 0.05)!
    const tailStart = done.polls.findLast((p) => p.done <= lineCount * 0.95) ?? done.polls[0]
    const threads = threadCpuMsBetween(threadsBefore, threadsAfter)
    const cpu = cpuAfter - cpuBefore
    const main = threads.get('main (JS)') ?? 0
    const memory = await memoryOf(gateway.pid)
    // After the measured run, so it does not warm the validation threads for it.
    const dryRunMs = await dryRun(gateway.url, key, measured)
    await gateway.stop()
    const lines = await recorded(gateway.env, id)
    const meanLatencyMs = lines.latencies.reduce((a, b) => a + b, 0) / lines.latencies.length
    return {
      rawRate: raw.rate,
      rawMeanMs: raw.meanMs,
      rawSimUs: raw.simUs,
      rawClientUs: raw.clientUs,
      simUsPerLine: (simCpu * 1000) / lineCount,
      machineBusy:
        (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total),
      rawMachineBusy: raw.machineBusy,
      gatewayWaitShare: gatewayWait / (t2 - t0),
      postgresUsPerLine: (postgresCpu * 1000) / lineCount,
      simWaitShare: simWait / (t2 - t0),
      ingestMs: t1 - t0,
      dryRunMs,
      totalRate: lineCount / ((t2 - t0) / 1000),
      dispatchRate: lineCount / ((t2 - t1) / 1000),
      steadyRate,
      rampMs: rampEnd.t - t1,
      firstSendMs: rampRead ? firstArrivals[0]! - created : NaN,
      fullMs: rampRead ? (firstArrivals[concurrency - 1] ?? NaN) - created : NaN,
      lastSendToDoneMs: completedAt - lastArrival,
      tailMs: t2 - tailStart.t,
      cpuUsPerLine: (cpu * 1000) / lineCount,
      mainUsPerLine: (main * 1000) / lineCount,
      cpuShare: cpu / (t2 - t0),
      mainShare: main / (t2 - t0),
      meanLatencyMs,
      p50LatencyMs: quantile(lines.latencies, 0.5),
      p99LatencyMs: quantile(lines.latencies, 0.99),
      retried: lines.attempts - lineCount,
      failed: done.counts.failed,
      peakInFlight: stats.peakInFlight,
      threads,
      rss: memory.rss,
      peakRss: memory.peak,
    }
  } finally {
    await gateway.stop().catch(() => {})
    await schema?.drop()
  }
}

const results: RunResult[] = []
try {
  for (let run = 1; run <= runs; run++) {
    let r: RunResult
    try {
      r = await oneRun(run)
    } catch (error) {
      // One failed run (a shared store restarted under it) leaves the others standing.
      console.error(`run ${run} failed: ${(error as Error).message}`)
      continue
    }
    results.push(r)
    console.error(
      `run ${run}: gateway ${r.totalRate.toFixed(0)} lines/s (steady ${r.steadyRate.toFixed(0)}), simulator alone ${r.rawRate.toFixed(0)} requests/s, ${r.cpuUsPerLine.toFixed(0)} µs CPU/line, upstream latency mean ${r.meanLatencyMs.toFixed(1)} ms`,
    )
  }
} finally {
  await simulator.stop()
}

if (results.length === 0) throw new Error('every run failed')
const m = (pick: (r: RunResult) => number) => median(results.map(pick))
const ideal = concurrency / (latencyMs / 1000)
const total = m((r) => r.totalRate)
const steady = m((r) => r.steadyRate)
const rawRate = m((r) => r.rawRate)
const meanLatency = m((r) => r.meanLatencyMs)
const pct = (x: number) => `${(x * 100).toFixed(0)}%`
const n = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 0 })
console.log(
  `dispatch (${values.store}) of ${n(lineCount)} chat lines, ${concurrency} in flight, simulator at ${latencyMs} ms, median of ${results.length}${results.length < runs ? ` (${runs - results.length} failed)` : ''}:`,
)
console.log(
  `  gateway, POST → completed      ${n(total).padStart(6)} lines/s   ${pct(total / ideal)} of ideal, ${pct(total / rawRate)} of the simulator alone`,
)
console.log(
  `    of which ingest (POST → 201) ${n(m((r) => r.ingestMs)).padStart(6)} ms;  201 → completed ${n(m((r) => r.dispatchRate))} lines/s;  steady state (10%→90%) ${n(steady)} lines/s (${pct(steady / ideal)} of ideal)`,
)
console.log(
  `      a dry run of the same file just after (upload, validation, quote; nothing stored) ${n(m((r) => r.dryRunMs))} ms`,
)
const fivePercentMs = ((lineCount * 0.05) / steady) * 1000
console.log(
  `    first 5% of lines (from the 201) ${n(m((r) => r.rampMs))} ms, last 5% (to completed) ${n(m((r) => r.tailMs))} ms; ${n(fivePercentMs)} ms each at the steady rate`,
)
console.log(
  `    201 → the first upstream request ${n(m((r) => r.firstSendMs))} ms, → the ${concurrency}th ${n(m((r) => r.fullMs))} ms; the last upstream request → completed ${n(m((r) => r.lastSendToDoneMs))} ms (a latency is ${latencyMs} ms; the bench polls every 50 ms)`,
)
console.log(`  ideal (concurrency ÷ latency)  ${n(ideal).padStart(6)} lines/s`)
console.log(
  `  simulator alone, plain client  ${n(rawRate).padStart(6)} requests/s   (providers/http-client.ts, ${concurrency} in flight, ${n(simRequests)} requests, mean latency ${m((r) => r.rawMeanMs).toFixed(1)} ms)`,
)
console.log(
  `  gateway CPU                    ${n(m((r) => r.cpuUsPerLine)).padStart(6)} µs/line   (${pct(m((r) => r.cpuShare))} of one core over the run; JS thread ${n(m((r) => r.mainUsPerLine))} µs/line, ${pct(m((r) => r.mainShare))} of a core)`,
)
if (values.store === 'postgres')
  console.log(
    `  PostgreSQL server CPU          ${n(m((r) => r.postgresUsPerLine)).padStart(6)} µs/line   (every postgres process on the box, so other users' queries count too)`,
  )
console.log(
  `  plain client CPU               ${n(m((r) => r.rawClientUs)).padStart(6)} µs/request (the bare upstream call, same client library; the JS thread's budget at the ideal rate is ${n(1e6 / ideal)} µs/line)`,
)
console.log(
  `  upstream latency, as recorded  mean ${meanLatency.toFixed(1)} ms, p50 ${m((r) => r.p50LatencyMs).toFixed(0)} ms, p99 ${m((r) => r.p99LatencyMs).toFixed(0)} ms (simulator set to ${latencyMs} ms)`,
)
console.log(
  `  Little's law                   mean in flight = steady rate × mean latency = ${((steady * meanLatency) / 1000).toFixed(0)} of ${concurrency}; at ${concurrency} the recorded latency allows ${n(concurrency / (meanLatency / 1000))} lines/s`,
)
console.log(
  `  simulator CPU                  ${n(m((r) => r.simUsPerLine)).padStart(6)} µs/request under the gateway, ${n(m((r) => r.rawSimUs))} µs/request under the plain client`,
)
console.log(
  `  machine (2 cores) busy         ${pct(m((r) => r.machineBusy))} during the gateway run, ${pct(m((r) => r.rawMachineBusy))} during the plain client run (all processes)`,
)
console.log(
  `  run-queue wait (runnable, no core free): gateway JS thread ${pct(m((r) => r.gatewayWaitShare))} of the run, simulator JS thread ${pct(m((r) => r.simWaitShare))}`,
)
console.log(
  `  simulator peak in flight ${m((r) => r.peakInFlight)}; retried attempts ${m((r) => r.retried)}; failed lines ${m((r) => r.failed)}`,
)
const mib = (bytes: number) => `${n(bytes / 2 ** 20)} MiB`
console.log(
  `  gateway memory                 ${mib(m((r) => r.rss))} resident at the end, peak ${mib(m((r) => r.peakRss))} (warm-up and measured batch)`,
)
const last = results.at(-1)!
const threadText = [...last.threads]
  .filter(([, ms]) => ms >= 10)
  .sort((a, b) => b[1] - a[1])
  .map(([name, ms]) => `${name} ${n(ms)} ms`)
  .join(', ')
console.log(`  gateway threads (last run)     ${threadText}`)
