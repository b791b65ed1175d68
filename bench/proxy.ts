/**
 * Live proxy: POST /v1/chat/completions through a gateway process vs straight to the upstream
 * simulator (its own process, 0 ms latency), same run, same client (an undici Pool with one
 * connection per request in flight), at several concurrency levels. Prints p50 and p99 latency
 * of each, the latency the gateway adds, requests/s, and the gateway's CPU time per request.
 *
 *   bun bench/proxy.ts [--levels 1,16,64] [--requests 5000] [--warmup 500] [--runs 3] [--store sqlite|postgres] [--profile]
 *
 * --profile writes the gateway's CPU profile to bench/out/prof/ (see bench/prof-summary.ts).
 */
import { parseArgs } from 'node:util'
import { Pool } from 'undici/index.js'
import { writeCatalog } from '../test/helpers/catalog.ts'
import { benchSchema, closedLoop, cpuMs, median, newKey, profileArgs, quantile, randomPort, schedMs, spawnGateway, spawnSimulator } from './lib.ts'

const { values } = parseArgs({
  options: {
    levels: { type: 'string', default: '1,16,64' },
    requests: { type: 'string', default: '5000' },
    warmup: { type: 'string', default: '500' },
    runs: { type: 'string', default: '3' },
    store: { type: 'string', default: 'sqlite' },
    profile: { type: 'boolean', default: false },
  },
})
const levels = values.levels.split(',').map(Number)
const requests = Number(values.requests)
const warmup = Number(values.warmup)
const runs = Number(values.runs)

const simulator = await spawnSimulator(['--latency-ms', '0'], randomPort(19_500))
const catalog = writeCatalog({
  providers: { bench: { kind: 'openai', base_url: `${simulator.url}/v1`, max_concurrency: 256, timeout_s: 60 } },
  models: [{ id: 'bench/chat', endpoints: ['chat'], context_tokens: 128000, max_output_tokens: 4096, offerings: [{ provider: 'bench', upstream_model: 'sim-chat', input_usd_per_mtok: '0.05', output_usd_per_mtok: '0.40' }] }],
})
const env: Record<string, string> = { MULTIGRID_CONFIG: catalog }
const schema = values.store === 'postgres' ? await benchSchema() : null
if (schema) env.DATABASE_URL = schema.url
const bunArgs = values.profile ? profileArgs(`proxy-${values.store}`) : []
const gateway = await spawnGateway(env, randomPort(18_700), bunArgs)
const key = await newKey(gateway.url)

const messages = [{ role: 'user', content: 'Classify the sentiment of this review as positive, negative or neutral. Review: the parcel arrived late but support replaced it quickly.' }]
const targets = {
  direct: { origin: simulator.url, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'sim-chat', messages, max_tokens: 16 }) },
  gateway: { origin: gateway.url, headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify({ model: 'bench/chat', messages, max_tokens: 16 }) },
}

interface Measure {
  p50: number
  p99: number
  rate: number
  cpuUs: number
  /** Share of the wall time the target's JS thread ran, and waited for a core while runnable. */
  busy: number
  waiting: number
}

async function measure(target: keyof typeof targets, concurrency: number): Promise<Measure> {
  const { origin, headers, body } = targets[target]
  const pool = new Pool(origin, { connections: concurrency })
  const send = async () => {
    const response = await pool.request({ path: '/v1/chat/completions', method: 'POST', headers, body })
    await response.body.text()
    return response.statusCode === 200
  }
  await closedLoop({ concurrency, total: warmup, maxMs: 60_000, send })
  const pid = target === 'gateway' ? gateway.pid : simulator.pid
  const before = await cpuMs(pid)
  const schedBefore = await schedMs(pid)
  const result = await closedLoop({ concurrency, total: requests, maxMs: 120_000, send })
  const cpu = (await cpuMs(pid)) - before
  const schedAfter = await schedMs(pid)
  await pool.close()
  if (result.failed > 0) throw new Error(`${target} at ${concurrency}: ${result.failed} requests failed`)
  return {
    p50: quantile(result.latencies, 0.5) * 1000,
    p99: quantile(result.latencies, 0.99) * 1000,
    rate: result.ok / (result.elapsedMs / 1000),
    cpuUs: (cpu * 1000) / result.ok,
    busy: (schedAfter.runMs - schedBefore.runMs) / result.elapsedMs,
    waiting: (schedAfter.waitMs - schedBefore.waitMs) / result.elapsedMs,
  }
}

const results = new Map<number, { direct: Measure[]; gateway: Measure[] }>()
try {
  for (let run = 0; run < runs; run++) {
    for (const level of levels) {
      const entry = results.get(level) ?? { direct: [], gateway: [] }
      results.set(level, entry)
      // Alternate which goes first, so drift on a shared box falls on both alike.
      const order: (keyof typeof targets)[] = run % 2 === 0 ? ['direct', 'gateway'] : ['gateway', 'direct']
      for (const target of order) entry[target].push(await measure(target, level))
    }
  }
} finally {
  await gateway.stop()
  await simulator.stop()
  await schema?.drop()
}

const n = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 0 })
const col = (x: number, width: number) => n(x).padStart(width)
const share = (x: number) => `${(x * 100).toFixed(0)}%`.padStart(4)
console.log(`live proxy (${values.store}), POST /v1/chat/completions, simulator at 0 ms, ${n(requests)} requests per level after ${n(warmup)} warm-up, median of ${runs}:`)
console.log('  in flight │ direct p50 µs   p99 µs   req/s │ gateway p50 µs   p99 µs   req/s │ added p50 µs   p99 µs │ req/s ratio │ CPU µs/req gateway  simulator │ JS thread busy / waiting for a core: gateway  simulator')
for (const [level, entry] of results) {
  const d = (pick: (m: Measure) => number) => median(entry.direct.map(pick))
  const g = (pick: (m: Measure) => number) => median(entry.gateway.map(pick))
  const dp50 = d((m) => m.p50), dp99 = d((m) => m.p99), drate = d((m) => m.rate)
  const gp50 = g((m) => m.p50), gp99 = g((m) => m.p99), grate = g((m) => m.rate)
  console.log(
    `  ${String(level).padStart(9)} │ ${col(dp50, 13)} ${col(dp99, 8)} ${col(drate, 7)} │ ${col(gp50, 14)} ${col(gp99, 8)} ${col(grate, 7)} │ ${col(gp50 - dp50, 12)} ${col(gp99 - dp99, 8)} │ ${(grate / drate).toFixed(2).padStart(10)}× │ ${col(g((m) => m.cpuUs), 18)} ${col(d((m) => m.cpuUs), 10)} │ ${share(g((m) => m.busy))} / ${share(g((m) => m.waiting))}   ${share(d((m) => m.busy))} / ${share(d((m) => m.waiting))}`,
  )
}
