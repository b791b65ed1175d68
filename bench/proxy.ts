/**
 * Live proxy: POST /v1/chat/completions through a gateway process (auth, rate limit, hold and
 * billing all on), through a minimal Elysia proxy that parses JSON both ways (bench/minimal-proxy.ts),
 * and straight to the upstream simulator (its own process, 0 ms latency), same run, same client
 * (an undici Pool with one connection per request in flight), at several concurrency levels.
 * Prints p50 latency of each, requests/s, the gateway's share of the minimal proxy's
 * requests/s, and CPU time per request of the gateway and the minimal proxy.
 *
 *   bun bench/proxy.ts [--levels 1,16,64] [--requests 5000] [--warmup 500] [--settle 30000] [--runs 3]
 *     [--store sqlite|postgres] [--profile] [--baseline /path/to/another/checkout]
 *
 * --settle: requests each target serves once, at 64 in flight, before anything is measured. JSC
 * compiles hot code on its own threads (JITWorker) for the first tens of thousands of calls: after
 * 500 the gateway's compiler threads still used ~30 µs of CPU per call, ~1 µs after 30,000. A
 * running gateway is past that, so the figures are taken after it; "JIT" prints what the compiler
 * threads still used while measuring, so a figure taken too early shows.
 *
 * --baseline also runs that checkout's gateway (e.g. the commit before a change) in the same run,
 * on a store of its own, printed as a line of its own.
 *
 * --profile writes the gateway's CPU profile to bench/out/prof/ (see bench/prof-summary.ts).
 *
 * The same gateway is also measured on the clients' APIs (docs/openai-facade.md), the same prompt each time,
 * translated to the same chat call: POST /v1/responses ("responses") and POST
 * /anthropic/v1/messages ("messages"); their CPU µs/req beside chat's is the translation's cost.
 */
import { parseArgs } from 'node:util'
import { Pool } from 'undici/index.js'
import { join } from 'node:path'
import {
  benchSchema,
  closedLoop,
  cpuMs,
  median,
  newKey,
  profileArgs,
  quantile,
  randomPort,
  threadCpuMs,
  ROOT,
  schedMs,
  spawnGateway,
  spawnSimulator,
  benchCatalog,
  BENCH_MODEL,
  serverProcessEnv,
} from './lib.ts'

const { values } = parseArgs({
  options: {
    levels: { type: 'string', default: '1,16,64' },
    requests: { type: 'string', default: '5000' },
    warmup: { type: 'string', default: '500' },
    settle: { type: 'string', default: '30000' },
    runs: { type: 'string', default: '3' },
    store: { type: 'string', default: 'sqlite' },
    profile: { type: 'boolean', default: false },
    baseline: { type: 'string' },
  },
})
const levels = values.levels.split(',').map(Number)
const requests = Number(values.requests)
const warmup = Number(values.warmup)
const runs = Number(values.runs)
const settle = Number(values.settle)

const simulator = await spawnSimulator(['--latency-ms', '0'], randomPort(19_500))
const catalog = benchCatalog(`${simulator.url}/v1`, 256)
const env: Record<string, string> = { MULTIGRID_CONFIG: catalog }
const schema = values.store === 'postgres' ? await benchSchema() : null
if (schema) env.DATABASE_URL = schema.url
const bunArgs = values.profile ? profileArgs(`proxy-${values.store}`) : []
const gateway = await spawnGateway(env, randomPort(18_700), bunArgs)
const key = await newKey(gateway.url)
const baselineSchema = values.baseline && values.store === 'postgres' ? await benchSchema() : null
const baseline = values.baseline
  ? await spawnGateway(
      { ...env, ...(baselineSchema ? { DATABASE_URL: baselineSchema.url } : {}) },
      randomPort(17_900),
      [],
      values.baseline,
    )
  : null
const baselineKey = baseline ? await newKey(baseline.url) : ''
const minimalPort = randomPort(18_100)
const minimalChild = Bun.spawn(
  [
    process.execPath,
    join(ROOT, 'bench/minimal-proxy.ts'),
    '--port',
    String(minimalPort),
    '--upstream',
    simulator.url,
  ],
  { env: serverProcessEnv(), stdout: 'inherit', stderr: 'inherit' },
)
const minimal = { url: `http://127.0.0.1:${minimalPort}`, pid: minimalChild.pid }
for (let i = 0; i < 100; i++) {
  try {
    if ((await fetch(`${minimal.url}/healthz`)).ok) break
  } catch {}
  await Bun.sleep(50)
}

const messages = [
  {
    role: 'user',
    content:
      'Classify the sentiment of this review as positive, negative or neutral. Review: the parcel arrived late but support replaced it quickly.',
  },
]
const targets: Record<
  'direct' | 'minimal' | 'gateway' | 'baseline' | 'responses' | 'messages',
  { origin: string; headers: Record<string, string>; body: string; path?: string }
> = {
  direct: {
    origin: simulator.url,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'sim-chat', messages, max_tokens: 16 }),
  },
  minimal: {
    origin: minimal.url,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: BENCH_MODEL, messages, max_tokens: 16 }),
  },
  gateway: {
    origin: gateway.url,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: BENCH_MODEL, messages, max_tokens: 16 }),
  },
  baseline: {
    origin: baseline?.url ?? '',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${baselineKey}` },
    body: JSON.stringify({ model: BENCH_MODEL, messages, max_tokens: 16 }),
  },
  responses: {
    origin: gateway.url,
    path: '/v1/responses',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: BENCH_MODEL, input: messages[0].content, max_output_tokens: 16 }),
  },
  messages: {
    origin: gateway.url,
    path: '/anthropic/v1/messages',
    headers: { 'content-type': 'application/json', 'x-api-key': key },
    body: JSON.stringify({ model: BENCH_MODEL, messages, max_tokens: 16 }),
  },
}

interface Measure {
  p50: number
  p99: number
  rate: number
  cpuUs: number
  /** Of cpuUs, what JSC's compiler threads (JITWorker) used. */
  jitUs: number
  /** Share of the wall time the target's JS thread ran, and waited for a core while runnable. */
  busy: number
  waiting: number
}

function sender(target: keyof typeof targets, concurrency: number) {
  const { origin, headers, body, path } = targets[target]
  const pool = new Pool(origin, { connections: concurrency })
  const send = async () => {
    const response = await pool.request({
      path: path ?? '/v1/chat/completions',
      method: 'POST',
      headers,
      body,
    })
    const text = await response.body.text()
    if (response.statusCode !== 200 && !firstFailure.has(target))
      firstFailure.set(target, `${response.statusCode} ${text.slice(0, 300)}`)
    return response.statusCode === 200
  }
  return { pool, send }
}

/** The first refused answer of each target, for the message when a level fails. */
const firstFailure = new Map<keyof typeof targets, string>()

const jitMs = async (pid: number) => (await threadCpuMs(pid)).get('JITWorker') ?? 0

async function measure(target: keyof typeof targets, concurrency: number): Promise<Measure> {
  const { pool, send } = sender(target, concurrency)
  await closedLoop({ concurrency, total: warmup, maxMs: 60_000, send })
  const pid = {
    gateway: gateway.pid,
    baseline: baseline?.pid ?? 0,
    minimal: minimal.pid,
    direct: simulator.pid,
    responses: gateway.pid,
    messages: gateway.pid,
  }[target]
  const before = await cpuMs(pid)
  const jitBefore = await jitMs(pid)
  const schedBefore = await schedMs(pid)
  const result = await closedLoop({ concurrency, total: requests, maxMs: 120_000, send })
  const cpu = (await cpuMs(pid)) - before
  const jit = (await jitMs(pid)) - jitBefore
  const schedAfter = await schedMs(pid)
  await pool.close()
  if (result.failed > 0)
    throw new Error(
      `${target} at ${concurrency}: ${result.failed} requests failed; first: ${firstFailure.get(target) ?? 'no answer (a connection error)'}`,
    )
  return {
    p50: quantile(result.latencies, 0.5) * 1000,
    p99: quantile(result.latencies, 0.99) * 1000,
    rate: result.ok / (result.elapsedMs / 1000),
    cpuUs: (cpu * 1000) / result.ok,
    jitUs: (jit * 1000) / result.ok,
    busy: (schedAfter.runMs - schedBefore.runMs) / result.elapsedMs,
    waiting: (schedAfter.waitMs - schedBefore.waitMs) / result.elapsedMs,
  }
}

const results = new Map<number, Record<keyof typeof targets, Measure[]>>()
try {
  // Past JSC's compiling of the hot paths (see --settle), each target alike.
  for (const target of [
    'direct',
    'minimal',
    'gateway',
    'responses',
    'messages',
    ...(baseline ? (['baseline'] as const) : []),
  ] as const) {
    const { pool, send } = sender(target, 64)
    const settled = await closedLoop({ concurrency: 64, total: settle, maxMs: 120_000, send })
    await pool.close()
    if (settled.failed > 0)
      throw new Error(
        `${target}: ${settled.failed} requests failed settling; first: ${firstFailure.get(target) ?? 'no answer (a connection error)'}`,
      )
  }
  for (let run = 0; run < runs; run++) {
    for (const level of levels) {
      const entry = results.get(level) ?? {
        direct: [],
        minimal: [],
        gateway: [],
        baseline: [],
        responses: [],
        messages: [],
      }
      results.set(level, entry)
      // Alternate which goes first, so drift on a shared box falls on both alike.
      const order: (keyof typeof targets)[] = [
        'direct',
        'minimal',
        'gateway',
        'responses',
        'messages',
        ...(baseline ? (['baseline'] as const) : []),
      ]
      if (run % 2 === 1) order.reverse()
      for (const target of order) entry[target].push(await measure(target, level))
    }
  }
} finally {
  await gateway.stop()
  await baseline?.stop()
  await baselineSchema?.drop()
  minimalChild.kill('SIGTERM')
  await minimalChild.exited
  await simulator.stop()
  await schema?.drop()
}

const n = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 0 })
const col = (x: number, width: number) => n(x).padStart(width)
const share = (x: number) => `${(x * 100).toFixed(0)}%`.padStart(4)
console.log(
  `live proxy (${values.store}), POST /v1/chat/completions, simulator at 0 ms, ${n(requests)} requests per level after ${n(warmup)} warm-up, median of ${runs}, each target settled by ${n(settle)} requests first:`,
)
console.log(
  '  CPU µs/req is the target process itself (the simulator\'s for "direct"); the gateway runs auth, rate limit, hold and billing.',
)
console.log(
  "  CPU µs/req counts every thread of the process; (JIT) is the part JSC's compiler threads used while measuring.",
)
console.log(
  '  in flight │ direct p50 µs   req/s │ minimal p50 µs   req/s  CPU µs/req (JIT) │ gateway p50 µs   req/s  CPU µs/req (JIT) │ gateway/minimal req/s │ gateway JS thread busy / waiting',
)
for (const [level, entry] of results) {
  const m = (target: keyof typeof targets, pick: (x: Measure) => number) =>
    median(entry[target].map(pick))
  const grate = m('gateway', (x) => x.rate)
  const mrate = m('minimal', (x) => x.rate)
  console.log(
    `  ${String(level).padStart(9)} │ ${col(
      m('direct', (x) => x.p50),
      13,
    )} ${col(
      m('direct', (x) => x.rate),
      7,
    )} │ ${col(
      m('minimal', (x) => x.p50),
      14,
    )} ${col(mrate, 7)} ${col(
      m('minimal', (x) => x.cpuUs),
      11,
    )} ${`(${n(m('minimal', (x) => x.jitUs))})`.padStart(5)} │ ${col(
      m('gateway', (x) => x.p50),
      14,
    )} ${col(grate, 7)} ${col(
      m('gateway', (x) => x.cpuUs),
      11,
    )} ${`(${n(m('gateway', (x) => x.jitUs))})`.padStart(5)} │ ${(grate / mrate).toFixed(2).padStart(20)}× │ ${share(m('gateway', (x) => x.busy))} / ${share(m('gateway', (x) => x.waiting))}`,
  )
  const chatCpu = m('gateway', (x) => x.cpuUs)
  const client = (target: 'responses' | 'messages') => {
    const cpu = m(target, (x) => x.cpuUs)
    const delta = cpu - chatCpu
    return `${target} p50 ${n(m(target, (x) => x.p50))} µs, ${n(m(target, (x) => x.rate))} req/s, CPU ${n(cpu)} µs/req (${delta >= 0 ? '+' : '−'}${Math.abs(delta).toFixed(1)} vs chat)`
  }
  console.log(`  ${' '.repeat(9)} │ translated: ${client('responses')}; ${client('messages')}`)
  if (baseline) {
    const brate = m('baseline', (x) => x.rate)
    console.log(
      `  ${' '.repeat(9)} │ baseline (${values.baseline}): p50 ${n(m('baseline', (x) => x.p50))} µs, ${n(brate)} req/s, CPU ${n(m('baseline', (x) => x.cpuUs))} µs/req (JIT ${n(m('baseline', (x) => x.jitUs))}), ${(brate / mrate).toFixed(2)}× the minimal proxy`,
    )
  }
}
