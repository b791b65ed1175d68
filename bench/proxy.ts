/**
 * Live proxy: POST /v1/chat/completions through a gateway process (auth, rate limit, hold and
 * billing all on) at LOG_LEVEL=warn and, a second gateway process, at LOG_LEVEL=info (one
 * `http.request` line per call, written to a file as a log collector would take it), through a
 * minimal Elysia proxy that parses JSON both ways (bench/minimal-proxy.ts; upstream through Bun's
 * fetch unless --minimal-client undici), and straight to the
 * upstream simulator (its own process, 0 ms latency), same run, same client (an undici Pool with
 * one connection per request in flight), at several concurrency levels. Prints p50 latency and
 * requests/s of each, each gateway's share of the minimal proxy's requests/s, and CPU time per
 * request of the gateways and the minimal proxy, and of the warn gateway and the minimal proxy by
 * thread (the minimal proxy's upstream calls run on Bun's HTTP client thread, the gateway's on its
 * JS thread).
 *
 *   bun bench/proxy.ts [--levels 1,16,64] [--requests 5000] [--warmup 500] [--settle 30000] [--runs 3]
 *     [--store sqlite|postgres] [--profile] [--baseline /path/to/another/checkout]
 *     [--minimal-client fetch|undici]
 *
 * --settle: requests each target serves once, at 64 in flight, before anything is measured. JSC
 * compiles hot code on its own threads (JITWorker) for the first tens of thousands of calls: after
 * 500 the gateway's compiler threads still used ~30 µs of CPU per call, ~1 µs after 30,000. A
 * running gateway is past that, so the figures are taken after it; "JIT" prints what the compiler
 * threads still used while measuring, so a figure taken too early shows.
 *
 * --baseline also runs that checkout's gateway (e.g. the commit before a change) in the same run,
 * at both log levels, on stores of its own, printed as lines of their own: before and after in
 * alternating runs (each run reverses the order of the targets).
 *
 * --profile writes the warn and info gateways' and the minimal proxy's CPU profiles to bench/out/prof/
 * (see bench/prof-summary.ts).
 *
 * The warn gateway is also measured on the clients' APIs (docs/openai-facade.md), the same prompt
 * each time, translated to the same chat call: POST /v1/responses ("responses") and POST
 * /anthropic/v1/messages ("messages"); their CPU µs/req beside chat's is the translation's cost
 * end to end. Last, the info level's log line alone and the translations alone (request in,
 * answer out) are timed in this process, µs per call, steadier figures on a shared box.
 *
 * Every loop is bounded in count and in time; everything listens on 127.0.0.1.
 */
import { parseArgs } from 'node:util'
import { Pool } from 'undici/index.js'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
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
  threadCpuMsBetween,
  ROOT,
  schedMs,
  spawnGateway,
  spawnSimulator,
  benchCatalog,
  BENCH_MODEL,
  serverProcessEnv,
  type GatewayProcess,
} from './lib.ts'
import { timeTranslations } from './translation-cost.ts'
import { timeLogLine } from './log-line-cost.ts'

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
    'minimal-client': { type: 'string', default: 'fetch' },
  },
})
const levels = values.levels.split(',').map(Number)
const requests = Number(values.requests)
const warmup = Number(values.warmup)
const runs = Number(values.runs)
const settle = Number(values.settle)

const logDir = mkdtempSync(join(tmpdir(), 'mg-bench-logs-'))
/** Every process this bench started: stopped however it ends, a failed start-up included. */
const children: number[] = []
process.on('exit', () => {
  for (const pid of children) {
    try {
      process.kill(pid, 'SIGTERM')
    } catch {} // already stopped
  }
})
const simulator = await spawnSimulator(['--latency-ms', '0'], randomPort(19_500))
children.push(simulator.pid)
const catalog = benchCatalog(`${simulator.url}/v1`, 256)
const schemas: { drop(): Promise<void> }[] = []
const gateways: GatewayProcess[] = []

/** One gateway process of `root` at `logLevel`, on a store of its own, with a key. */
async function startGateway(
  name: string,
  options: { logLevel: string; port: number; root?: string; bunArgs?: string[] },
) {
  const env: Record<string, string> = { MULTIGRID_CONFIG: catalog, LOG_LEVEL: options.logLevel }
  if (values.store === 'postgres') {
    const schema = await benchSchema()
    schemas.push(schema)
    env.DATABASE_URL = schema.url
  }
  const gateway = await spawnGateway(env, options.port, options.bunArgs ?? [], {
    root: options.root,
    stdoutPath: join(logDir, `${name}.log`),
  })
  gateways.push(gateway)
  children.push(gateway.pid)
  return { gateway, key: await newKey(gateway.url) }
}

const warn = await startGateway('warn', {
  logLevel: 'warn',
  port: randomPort(18_700),
  bunArgs: values.profile ? profileArgs(`proxy-${values.store}`) : [],
})
const info = await startGateway('info', {
  logLevel: 'info',
  port: randomPort(17_300),
  bunArgs: values.profile ? profileArgs(`proxy-${values.store}-info`) : [],
})
const baseWarn = values.baseline
  ? await startGateway('baseline-warn', {
      logLevel: 'warn',
      port: randomPort(17_900),
      root: values.baseline,
    })
  : null
const baseInfo = values.baseline
  ? await startGateway('baseline-info', {
      logLevel: 'info',
      port: randomPort(16_700),
      root: values.baseline,
    })
  : null

const minimalPort = randomPort(18_100)
const minimalChild = Bun.spawn(
  [
    process.execPath,
    ...(values.profile ? profileArgs('proxy-minimal') : []),
    join(ROOT, 'bench/minimal-proxy.ts'),
    '--port',
    String(minimalPort),
    '--upstream',
    simulator.url,
    '--client',
    values['minimal-client'],
  ],
  { env: serverProcessEnv(), stdout: 'inherit', stderr: 'inherit' },
)
const minimal = { url: `http://127.0.0.1:${minimalPort}`, pid: minimalChild.pid }
children.push(minimal.pid)
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
const chatBody = JSON.stringify({ model: BENCH_MODEL, messages, max_tokens: 16 })
const json = { 'content-type': 'application/json' }
const bearer = (key: string) => ({ ...json, authorization: `Bearer ${key}` })

type TargetName =
  'direct' | 'minimal' | 'warn' | 'info' | 'responses' | 'messages' | 'baseWarn' | 'baseInfo'

interface Target {
  origin: string
  pid: number
  headers: Record<string, string>
  body: string
  path?: string
}

const targets: Partial<Record<TargetName, Target>> = {
  direct: {
    origin: simulator.url,
    pid: simulator.pid,
    headers: json,
    body: JSON.stringify({ model: 'sim-chat', messages, max_tokens: 16 }),
  },
  minimal: { origin: minimal.url, pid: minimal.pid, headers: json, body: chatBody },
  warn: {
    origin: warn.gateway.url,
    pid: warn.gateway.pid,
    headers: bearer(warn.key),
    body: chatBody,
  },
  info: {
    origin: info.gateway.url,
    pid: info.gateway.pid,
    headers: bearer(info.key),
    body: chatBody,
  },
  responses: {
    origin: warn.gateway.url,
    pid: warn.gateway.pid,
    path: '/v1/responses',
    headers: bearer(warn.key),
    body: JSON.stringify({ model: BENCH_MODEL, input: messages[0].content, max_output_tokens: 16 }),
  },
  messages: {
    origin: warn.gateway.url,
    pid: warn.gateway.pid,
    path: '/anthropic/v1/messages',
    headers: { ...json, 'x-api-key': warn.key },
    body: chatBody,
  },
}
if (baseWarn && baseInfo) {
  targets.baseWarn = {
    origin: baseWarn.gateway.url,
    pid: baseWarn.gateway.pid,
    headers: bearer(baseWarn.key),
    body: chatBody,
  }
  targets.baseInfo = {
    origin: baseInfo.gateway.url,
    pid: baseInfo.gateway.pid,
    headers: bearer(baseInfo.key),
    body: chatBody,
  }
}
const names = Object.keys(targets) as TargetName[]

interface Measure {
  p50: number
  p99: number
  rate: number
  cpuUs: number
  /** Share of the wall time the target's JS thread ran, and waited for a core while runnable. */
  busy: number
  waiting: number
  /** CPU µs/req by thread name (the JS thread is "main (JS)"; JSC's compiler threads "JITWorker"). */
  threads: Map<string, number>
}

/** The first refused answer of each target, for the message when a level fails. */
const firstFailure = new Map<TargetName, string>()

function sender(name: TargetName, concurrency: number) {
  const { origin, headers, body, path } = targets[name]!
  const pool = new Pool(origin, { connections: concurrency })
  const send = async () => {
    const response = await pool.request({
      path: path ?? '/v1/chat/completions',
      method: 'POST',
      headers,
      body,
    })
    const text = await response.body.text()
    if (response.statusCode !== 200 && !firstFailure.has(name))
      firstFailure.set(name, `${response.statusCode} ${text.slice(0, 300)}`)
    return response.statusCode === 200
  }
  return { pool, send }
}

const failed = (name: TargetName, what: string, count: number) =>
  new Error(
    `${name} ${what}: ${count} requests failed; first: ${firstFailure.get(name) ?? 'no answer (a connection error)'}`,
  )

async function measure(name: TargetName, concurrency: number): Promise<Measure> {
  const { pool, send } = sender(name, concurrency)
  await closedLoop({ concurrency, total: warmup, maxMs: 60_000, send })
  const pid = targets[name]!.pid
  const before = await cpuMs(pid)
  const threadsBefore = await threadCpuMs(pid)
  const schedBefore = await schedMs(pid)
  const result = await closedLoop({ concurrency, total: requests, maxMs: 120_000, send })
  const cpu = (await cpuMs(pid)) - before
  const threads = threadCpuMsBetween(threadsBefore, await threadCpuMs(pid))
  const schedAfter = await schedMs(pid)
  await pool.close()
  if (result.failed > 0) throw failed(name, `at ${concurrency}`, result.failed)
  return {
    p50: quantile(result.latencies, 0.5) * 1000,
    p99: quantile(result.latencies, 0.99) * 1000,
    rate: result.ok / (result.elapsedMs / 1000),
    cpuUs: (cpu * 1000) / result.ok,
    threads: new Map([...threads].map(([name, ms]) => [name, (ms * 1000) / result.ok])),
    busy: (schedAfter.runMs - schedBefore.runMs) / result.elapsedMs,
    waiting: (schedAfter.waitMs - schedBefore.waitMs) / result.elapsedMs,
  }
}

/** One completion as the simulator answers it, for the in-process translation timing. */
const completion = (await (
  await fetch(`${simulator.url}/v1/chat/completions`, {
    method: 'POST',
    headers: json,
    body: targets.direct!.body,
  })
).json()) as Record<string, unknown>

// The gateway's own route table, for timing its log line below (OpenAPI's `{id}` is Elysia's `:id`).
const openapi = (await (await fetch(`${warn.gateway.url}/openapi.json`)).json()) as {
  paths: Record<string, Record<string, unknown>>
}
const routeTable = Object.entries(openapi.paths).flatMap(([path, methods]) =>
  Object.keys(methods).map((method) => ({
    method: method.toUpperCase(),
    path: path.replace(/\{([^}]+)\}/g, ':$1'),
  })),
)

const results = new Map<number, Record<TargetName, Measure[]>>()
try {
  // Past JSC's compiling of the hot paths (see --settle), each target alike.
  for (const name of names) {
    const { pool, send } = sender(name, 64)
    const settled = await closedLoop({ concurrency: 64, total: settle, maxMs: 120_000, send })
    await pool.close()
    if (settled.failed > 0) throw failed(name, 'settling', settled.failed)
  }
  for (let run = 0; run < runs; run++) {
    for (const level of levels) {
      const entry =
        results.get(level) ??
        (Object.fromEntries(names.map((name) => [name, []])) as unknown as Record<
          TargetName,
          Measure[]
        >)
      results.set(level, entry)
      // Alternate which goes first, so drift on a shared box falls on all alike.
      const order = run % 2 === 1 ? [...names].reverse() : names
      for (const name of order) entry[name].push(await measure(name, level))
    }
  }
} finally {
  for (const gateway of gateways) await gateway.stop()
  minimalChild.kill('SIGTERM')
  await minimalChild.exited
  await simulator.stop()
  for (const schema of schemas) await schema.drop()
}
const logLines = (await Bun.file(join(logDir, 'info.log')).text()).split('\n').length - 1
rmSync(logDir, { recursive: true, force: true })

/** Of a measure's CPU µs/req, what JSC's compiler threads used. */
const jitUs = (x: Measure) => x.threads.get('JITWorker') ?? 0
const n = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 0 })
const col = (x: number, width: number) => n(x).padStart(width)
const share = (x: number) => `${(x * 100).toFixed(0)}%`.padStart(4)
const ratio = (x: number) => `${x.toFixed(2)}×`
console.log(
  `live proxy (${values.store}), POST /v1/chat/completions, simulator at 0 ms, ${n(requests)} requests per level after ${n(warmup)} warm-up, median of ${runs}, each target settled by ${n(settle)} requests first:`,
)
console.log(
  '  CPU µs/req is the target process itself (the simulator\'s for "direct"); the gateways run auth, rate limit, hold and billing.',
)
console.log(
  "  CPU µs/req counts every thread of the process; (JIT) is the part JSC's compiler threads used while measuring.",
)
console.log(
  `  "info" is a second gateway at LOG_LEVEL=info; it wrote ${n(logLines)} log lines in all.`,
)
console.log(
  '  in flight │ direct   req/s │ minimal p50 µs   req/s CPU µs (JIT) │ warn p50 µs   req/s CPU µs (JIT) ×minimal │ info p50 µs   req/s CPU µs ×minimal │ info−warn │ warn JS thread busy / waiting',
)
for (const [level, entry] of results) {
  const m = (name: TargetName, pick: (x: Measure) => number) => median(entry[name].map(pick))
  const rate = (name: TargetName) => m(name, (x) => x.rate)
  const mrate = rate('minimal')
  const share1 = rate('warn') / mrate
  const share2 = rate('info') / mrate
  console.log(
    [
      `  ${String(level).padStart(9)}`,
      ` ${col(rate('direct'), 14)}`,
      ` ${col(
        m('minimal', (x) => x.p50),
        14,
      )} ${col(mrate, 7)} ${col(
        m('minimal', (x) => x.cpuUs),
        6,
      )} ${`(${n(m('minimal', jitUs))})`.padStart(5)}`,
      ` ${col(
        m('warn', (x) => x.p50),
        11,
      )} ${col(rate('warn'), 7)} ${col(
        m('warn', (x) => x.cpuUs),
        6,
      )} ${`(${n(m('warn', jitUs))})`.padStart(5)} ${ratio(share1).padStart(8)}`,
      ` ${col(
        m('info', (x) => x.p50),
        11,
      )} ${col(rate('info'), 7)} ${col(
        m('info', (x) => x.cpuUs),
        6,
      )} ${ratio(share2).padStart(8)}`,
      ` ${(share2 - share1 >= 0 ? '+' : '−') + Math.abs(share2 - share1).toFixed(2)}×`.padStart(10),
      ` ${share(m('warn', (x) => x.busy))} / ${share(m('warn', (x) => x.waiting))}`,
    ].join(' │'),
  )
  const chatCpu = m('warn', (x) => x.cpuUs)
  const client = (name: 'responses' | 'messages') => {
    const cpu = m(name, (x) => x.cpuUs)
    const delta = cpu - chatCpu
    return `${name} p50 ${n(m(name, (x) => x.p50))} µs, ${n(rate(name))} req/s, CPU ${n(cpu)} µs/req (${delta >= 0 ? '+' : '−'}${Math.abs(delta).toFixed(1)} vs chat)`
  }
  console.log(`  ${' '.repeat(9)} │ translated: ${client('responses')}; ${client('messages')}`)
  // Where each process spends its CPU: the minimal proxy's upstream calls run on Bun's HTTP
  // client thread, the gateway's on its JS thread (providers/http-client.ts says why).
  const byThread = (name: TargetName) => {
    const names = new Set(entry[name].flatMap((x) => [...x.threads.keys()]))
    return [...names]
      .map((thread) => [thread, m(name, (x) => x.threads.get(thread) ?? 0)] as const)
      .filter(([, us]) => us >= 1)
      .sort((a, b) => b[1] - a[1])
      .map(([thread, us]) => `${thread} ${n(us)}`)
      .join(', ')
  }
  console.log(
    `  ${' '.repeat(9)} │ CPU µs/req by thread: warn ${byThread('warn')}; minimal ${byThread('minimal')}`,
  )
  if (targets.baseWarn) {
    const line = (name: 'baseWarn' | 'baseInfo') =>
      `p50 ${n(m(name, (x) => x.p50))} µs, ${n(rate(name))} req/s, CPU ${n(m(name, (x) => x.cpuUs))} µs/req, ${ratio(rate(name) / mrate)} the minimal proxy`
    console.log(
      `  ${' '.repeat(9)} │ baseline (${values.baseline}): warn ${line('baseWarn')}; info ${line('baseInfo')}`,
    )
  }
}

const translations = timeTranslations(
  JSON.parse(targets.responses!.body),
  JSON.parse(targets.messages!.body),
  completion,
)
console.log(
  `the info log line alone, in this process (one http.request line of ${n(routeTable.length)} routes, batched writes to /dev/null): ${timeLogLine(routeTable, `${warn.gateway.url}/v1/chat/completions`).toFixed(2)} µs/request`,
)
console.log(
  `translations alone, in this process (request into chat and the chat answer back, median of 5 rounds of ${n(translations.calls)} calls): responses ${translations.responsesUs.toFixed(2)} µs/call, messages ${translations.messagesUs.toFixed(2)} µs/call`,
)
