/**
 * Scale-out: one chat batch through a fleet of 1, 2 and 3 gateway processes sharing PostgreSQL
 * and Redis, against the upstream simulator in a process of its own, in lines/s from the POST
 * to `completed`, side by side with where the CPU went: each gateway, PostgreSQL (all its
 * processes), Redis, the simulator, and the machine as a whole (/proc/stat). When the machine is
 * busy near 100% of its cores, adding instances cannot help: the machine is the limit. The machine
 * may be shared: what none of these processes used is shown as "other processes".
 * First, the cost of the fleet-wide provider gate itself: acquire + release in process, against
 * the in-process gate, and Redis round trips per request.
 *
 *   bun bench/scale.ts [--lines 20000] [--concurrency 256] [--latency-ms 50] [--instances 1,2,3]
 *     [--poll-ms 100] [--gate-ops 200000] [--warmup 10000]
 *
 * Each fleet first runs a warm-up batch of `--warmup` lines per instance (from the end of the
 * file, up to what the measured batch leaves), so that every instance's JIT has compiled the hot
 * paths before the measured batch, as bench/dispatch.ts does for one. With 2,000 lines for the
 * whole fleet, one instance used 262 µs of gateway CPU a line in the measured batch, against
 * 178–214 after 10,000 (docs/scale.md).
 *
 * Beside the rate, what the batch cost the database: how many times its `batches` row was
 * updated (pg_stat_user_tables, read when the fleet's backends are idle long enough to have
 * reported) and how often a statement of the fleet was waiting on a lock, sampled every 20 ms
 * from pg_stat_activity during the run (docs/scale.md).
 *
 * Needs PostgreSQL and Redis: TEST_DATABASE_URL and TEST_REDIS_URL, or the local defaults.
 */
import { readdirSync, readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import postgres from 'postgres'
import Redis from 'ioredis'
import { connectRedis } from '../src/coordination/redis.ts'
import { createFleetGates } from '../src/upstream/fleet-gate.ts'
import { createProviderGate, type ProviderGate } from '../src/upstream/provider-gate.ts'
import { createLogger } from '../src/telemetry/logger.ts'
import { freshSchemaUrl } from '../test/helpers/gateway.ts'
import {
  cpuMs,
  machineTicks,
  newKey,
  randomPort,
  spawnGateway,
  spawnSimulator,
  standardFile,
  type GatewayProcess,
  benchCatalog,
  BENCH_MODEL,
} from './lib.ts'

const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: '20000' },
    concurrency: { type: 'string', default: '256' },
    'latency-ms': { type: 'string', default: '50' },
    instances: { type: 'string', default: '1,2,3' },
    'poll-ms': { type: 'string', default: '100' },
    'gate-ops': { type: 'string', default: '200000' },
    warmup: { type: 'string', default: '10000' },
  },
})
const lineCount = Number(values.lines)
const concurrency = Number(values.concurrency)
const latencyMs = Number(values['latency-ms'])
const fleetSizes = values.instances.split(',').map(Number)
const gateOps = Number(values['gate-ops'])
const databaseUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const cores = availableParallelism()
const n = (x: number) => x.toLocaleString('en-US', { maximumFractionDigits: 0 })
const pct = (x: number) => `${(x * 100).toFixed(0)}%`

// ── the gate's own cost ───────────────────────────────────────────────────────────────────────

/** `ops` acquire/release pairs, `parallel` at a time, each holding its slot for one tick. */
async function gateRate(gate: ProviderGate, ops: number, parallel: number) {
  let next = 0
  const started = performance.now()
  const cpuBefore = process.cpuUsage()
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next++ < ops) {
        await gate.acquire()
        await null
        gate.release()
      }
    }),
  )
  const cpu = process.cpuUsage(cpuBefore)
  return {
    usPerOp: (cpu.user + cpu.system) / ops,
    opsPerS: ops / ((performance.now() - started) / 1000),
  }
}

async function gateCost() {
  const local = await gateRate(createProviderGate(concurrency), gateOps, concurrency * 2)
  const connection = await connectRedis(redisUrl)
  const fleet = createFleetGates(connection, {
    instance: `bench-${process.pid}`,
    ttlMs: 30_000,
    logger: createLogger('warn'),
    prefix: `mgbench:${process.pid}:`,
  })
  const gate = fleet.gate('bench', concurrency)
  const remote = await gateRate(gate, gateOps, concurrency * 2)
  const calls = gate.redisCalls
  await fleet.close()
  connection.disconnect()
  return { local, remote, callsPer1000: (calls / gateOps) * 1000 }
}

// ── the fleet ─────────────────────────────────────────────────────────────────────────────────

/** CPU ms of every process with this command name (postgres: the postmaster and its backends). */
async function cpuOfCommand(name: string): Promise<Map<number, number>> {
  const result = new Map<number, number>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() !== name) continue
      result.set(Number(entry), await cpuMs(Number(entry)))
    } catch {} // the process ended between the listing and the read
  }
  return result
}
/** CPU used since `before` by the processes in `after`, leaving out those in `exclude`. */
const usedSince = (
  before: Map<number, number>,
  after: Map<number, number>,
  exclude = new Set<number>(),
) => {
  let total = 0
  for (const [pid, ms] of after) if (!exclude.has(pid)) total += ms - (before.get(pid) ?? 0)
  return total
}

const MODEL = BENCH_MODEL
const allLines = (await Bun.file(await standardFile(MODEL)).text()).split('\n').filter(Boolean)
const measured = allLines.slice(0, lineCount).join('\n') + '\n'
/** The warm-up batch of a fleet of `size`: `--warmup` lines an instance, as many as are left. */
const warmupOf = (size: number) => {
  const count = Math.min(Number(values.warmup) * size, allLines.length - lineCount)
  return allLines.slice(allLines.length - count).join('\n') + '\n'
}

const simulator = await spawnSimulator(['--latency-ms', String(latencyMs)], randomPort(19_500))
const catalog = benchCatalog(`${simulator.url}/v1`, concurrency)

async function submit(url: string, key: string, body: string): Promise<string> {
  const response = await fetch(`${url}/v1/batches`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/jsonl' },
    body,
  })
  if (response.status !== 201)
    throw new Error(`submit answered ${response.status}: ${(await response.text()).slice(0, 300)}`)
  return ((await response.json()) as { id: string }).id
}

async function waitDone(url: string, key: string, id: string, maxMs: number) {
  const endAt = performance.now() + maxMs
  while (performance.now() < endAt) {
    const batch = (await (
      await fetch(`${url}/v1/batches/${id}`, { headers: { authorization: `Bearer ${key}` } })
    ).json()) as { status: string; request_counts: { succeeded: number } }
    if (!['validating', 'in_progress', 'finalizing', 'cancelling'].includes(batch.status))
      return batch
    await Bun.sleep(100)
  }
  throw new Error(`batch ${id} did not finish within ${maxMs} ms`)
}

async function evalCalls(redis: Redis) {
  const info = await redis.info('commandstats')
  return (
    Number(/cmdstat_evalsha:calls=(\d+)/.exec(info)?.[1] ?? 0) +
    Number(/cmdstat_eval:calls=(\d+)/.exec(info)?.[1] ?? 0)
  )
}

interface FleetResult {
  instances: number
  rate: number
  gatewaysMs: number[]
  postgresMs: number
  redisMs: number
  simulatorMs: number
  benchMs: number
  machineBusy: number
  elapsedMs: number
  peakInFlight: number
  redisCallsPerLine: number
  batchRowUpdates: number
  lockSamples: number
  lockWaits: number
  lockWaitsBy: Map<string, number>
}

/** Updates of the schema's `batches` rows so far, once the backends have flushed their counts. */
async function batchUpdates(sql: postgres.Sql, schema: string) {
  // A backend reports its table counts at most once a second, and once idle only after 10 s
  // (PGSTAT_IDLE_INTERVAL): the fleet's connections are given that long.
  await Bun.sleep(11_000)
  const [row] = await sql`
    SELECT n_tup_upd FROM pg_stat_user_tables WHERE schemaname = ${schema} AND relname = 'batches'`
  return Number(row?.n_tup_upd ?? 0)
}

/**
 * Samples, every 20 ms until stopped, the backends waiting on a lock, by what they wait for (a
 * row's `transactionid` or `tuple`, a `relation`...) and their statement's start.
 */
function sampleLockWaits(sql: postgres.Sql) {
  const by = new Map<string, number>()
  let samples = 0
  let waits = 0
  let running = true
  const done = (async () => {
    while (running) {
      const rows = await sql`
        SELECT wait_event || ': ' || left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 60) AS query
        FROM pg_stat_activity
        WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()`
      samples++
      waits += rows.length
      for (const row of rows) by.set(row.query, (by.get(row.query) ?? 0) + 1)
      await Bun.sleep(20)
    }
  })()
  return async () => {
    running = false
    await done
    return { samples, waits, by }
  }
}

async function runFleet(size: number, redis: Redis): Promise<FleetResult> {
  const { url, schema } = freshSchemaUrl(databaseUrl)
  const env = {
    DATABASE_URL: url,
    REDIS_URL: redisUrl,
    MULTIGRID_REDIS_PREFIX: `mgbench:${schema}:`,
    MULTIGRID_CONFIG: catalog,
    MULTIGRID_POLL_MS: String(values['poll-ms']),
    MULTIGRID_DEFAULT_MAX_OPEN_BATCHES: '1000',
  }
  const gateways: GatewayProcess[] = []
  // The server may be shared (other test runs): only the backends that appear from here on,
  // the fleet's connections, are counted as its PostgreSQL.
  const foreignPostgres = new Set((await cpuOfCommand('postgres')).keys())
  const stats = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    // One first, so it applies the migrations alone; the others join it.
    gateways.push(await spawnGateway(env, randomPort(18_000)))
    for (let i = 1; i < size; i++)
      gateways.push(await spawnGateway(env, randomPort(18_000 + i * 600)))
    const key = await newKey(gateways[0].url)
    const maxMs = 60_000 + lineCount * 10
    // Warm-up: JIT, upstream connections, store caches, on every instance.
    const warm = await waitDone(
      gateways[0].url,
      key,
      await submit(gateways[0].url, key, warmupOf(size)),
      maxMs,
    )
    if (warm.status !== 'completed') throw new Error(`warm-up batch ended ${warm.status}`)
    await fetch(`${simulator.url}/sim/reset`, { method: 'POST' })
    const updatesBefore = await batchUpdates(stats, schema)

    const before = {
      gateways: await Promise.all(gateways.map((g) => cpuMs(g.pid))),
      postgres: await cpuOfCommand('postgres'),
      redis: await cpuOfCommand('redis-server'),
      simulator: await cpuMs(simulator.pid),
      bench: await cpuMs(process.pid),
      machine: await machineTicks(),
      calls: await evalCalls(redis),
    }
    const stopSampling = sampleLockWaits(stats)
    const t0 = performance.now()
    const id = await submit(gateways[0].url, key, measured)
    const done = await waitDone(gateways[0].url, key, id, maxMs)
    const elapsedMs = performance.now() - t0
    const machine = await machineTicks()
    const locks = await stopSampling()
    const result: FleetResult = {
      instances: size,
      rate: lineCount / (elapsedMs / 1000),
      gatewaysMs: (await Promise.all(gateways.map((g) => cpuMs(g.pid)))).map(
        (ms, i) => ms - before.gateways[i],
      ),
      postgresMs: usedSince(before.postgres, await cpuOfCommand('postgres'), foreignPostgres),
      redisMs: usedSince(before.redis, await cpuOfCommand('redis-server')),
      simulatorMs: (await cpuMs(simulator.pid)) - before.simulator,
      benchMs: (await cpuMs(process.pid)) - before.bench,
      machineBusy: (machine.busy - before.machine.busy) / (machine.total - before.machine.total),
      elapsedMs,
      peakInFlight: (
        (await (await fetch(`${simulator.url}/sim/stats`)).json()) as { peakInFlight: number }
      ).peakInFlight,
      redisCallsPerLine: ((await evalCalls(redis)) - before.calls) / lineCount,
      // The bench's own polling reads the row; only updates count.
      batchRowUpdates: (await batchUpdates(stats, schema)) - updatesBefore,
      lockSamples: locks.samples,
      lockWaits: locks.waits,
      lockWaitsBy: locks.by,
    }
    if (done.status !== 'completed') throw new Error(`batch ended ${done.status}`)
    return result
  } finally {
    await Promise.all(gateways.map((g) => g.stop().catch(() => {})))
    await stats`DROP SCHEMA IF EXISTS ${stats(schema)} CASCADE`
    await stats.end()
  }
}

const redis = new Redis(redisUrl)
const results: FleetResult[] = []
let cost: Awaited<ReturnType<typeof gateCost>>
// Whatever else runs on the machine competes with the fleet: say how busy it was beforehand.
const idleBefore = await machineTicks()
await Bun.sleep(1000)
const idleAfter = await machineTicks()
const background = (idleAfter.busy - idleBefore.busy) / (idleAfter.total - idleBefore.total)
try {
  cost = await gateCost()
  for (const size of fleetSizes) {
    const r = await runFleet(size, redis)
    results.push(r)
    console.error(`${size} instance(s): ${n(r.rate)} lines/s, machine ${pct(r.machineBusy)} busy`)
  }
} finally {
  redis.disconnect()
  await simulator.stop()
}

const ideal = concurrency / (latencyMs / 1000)
console.log(
  `provider gate, acquire + release in process (${n(gateOps)} pairs, ${concurrency * 2} waiting, limit ${concurrency}):`,
)
console.log(
  `  in-process gate    ${cost.local.usPerOp.toFixed(2).padStart(6)} µs CPU/pair   ${n(cost.local.opsPerS).padStart(9)} pairs/s`,
)
console.log(
  `  fleet gate (Redis) ${cost.remote.usPerOp.toFixed(2).padStart(6)} µs CPU/pair   ${n(cost.remote.opsPerS).padStart(9)} pairs/s   ${cost.callsPer1000.toFixed(2)} Redis calls per 1,000 pairs`,
)
console.log('')
console.log(
  `scale-out: ${n(lineCount)} chat lines, fleet max_concurrency ${concurrency}, simulator at ${latencyMs} ms (ideal ${n(ideal)} lines/s), ${cores} cores, ${pct(background)} busy before the run`,
)
const row = (label: string, cell: (r: FleetResult) => string) =>
  console.log(`  ${label.padEnd(34)}${results.map((r) => cell(r).padStart(16)).join('')}`)
row('instances', (r) => String(r.instances))
row('lines/s, POST → completed', (r) => n(r.rate))
row('  vs 1 instance', (r) => `${(r.rate / results[0].rate).toFixed(2)}×`)
row('  of ideal', (r) => pct(r.rate / ideal))
row('upstream peak in flight', (r) => n(r.peakInFlight))
row('machine busy (all cores)', (r) => pct(r.machineBusy))
row('  = cores busy', (r) => (r.machineBusy * cores).toFixed(2))
const coreShare = (ms: number, r: FleetResult) => (ms / r.elapsedMs).toFixed(2)
row('cores used: gateways (sum)', (r) =>
  coreShare(
    r.gatewaysMs.reduce((a, b) => a + b, 0),
    r,
  ),
)
row('  each gateway', (r) => r.gatewaysMs.map((ms) => coreShare(ms, r)).join('/'))
row("  PostgreSQL (the fleet's backends)", (r) => coreShare(r.postgresMs, r))
row('  simulator', (r) => coreShare(r.simulatorMs, r))
row('  Redis', (r) => coreShare(r.redisMs, r))
row('  this bench (polling)', (r) => coreShare(r.benchMs, r))
// The machine may be shared: what the processes above did not use went to something else.
const ours = (r: FleetResult) =>
  (r.gatewaysMs.reduce((a, b) => a + b, 0) + r.postgresMs + r.redisMs + r.simulatorMs + r.benchMs) /
  r.elapsedMs
row('  other processes (not this run)', (r) =>
  Math.max(0, r.machineBusy * cores - ours(r)).toFixed(2),
)
row('CPU µs per line: gateways', (r) =>
  n((r.gatewaysMs.reduce((a, b) => a + b, 0) * 1000) / lineCount),
)
row('  PostgreSQL', (r) => n((r.postgresMs * 1000) / lineCount))
row('  simulator', (r) => n((r.simulatorMs * 1000) / lineCount))
row('Redis calls per line (fleet gate)', (r) => r.redisCallsPerLine.toFixed(3))
row('batches row updates (the batch)', (r) => n(r.batchRowUpdates))
row('lock waits: samples waiting', (r) => `${r.lockWaits}/${r.lockSamples}`)
row('  mean backends waiting', (r) => (r.lockWaits / Math.max(1, r.lockSamples)).toFixed(3))
for (const r of results) {
  const top = [...r.lockWaitsBy].sort((a, b) => b[1] - a[1]).slice(0, 4)
  for (const [query, count] of top)
    console.log(`  ${r.instances} instance(s), ${count}× waiting: ${query}`)
}
