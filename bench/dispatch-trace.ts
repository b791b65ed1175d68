/**
 * Where dispatch time goes: the gateway started in this process (src/gateway.ts, the real
 * composition), its store's dispatch methods wrapped with timers, and an event-loop monitor,
 * while one batch runs against the simulator in a process of its own. From the batch's 201 to its
 * completion (its ingest is bench/ingest's), prints per store method the calls, the time each
 * call waited for the store's dispatch thread, ms per 1,000 lines and the longest call; then the
 * event loop's stalls. The bench's own polling (one GET per 200 ms) shares the process; it is
 * noise.
 *
 *   bun bench/dispatch-trace.ts [--lines 50000] [--concurrency 256] [--latency-ms 50]
 *     [--poll-ms 10] [--store sqlite|postgres] [--reap-fix]
 *
 * --reap-fix (SQLite, a what-if, in this process only): reapExpiredLeases with its lease query
 * written `GROUP BY +batch_id`, which lets SQLite use the lines_running partial index instead
 * of walking every line in primary-key order (EXPLAIN QUERY PLAN: SCAN lines USING INDEX
 * sqlite_autoindex_lines_1 → SEARCH lines USING INDEX lines_running (lease_until<?)).
 */
import type { Database } from 'bun:sqlite'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadConfig } from '../src/config.ts'
import { startGateway } from '../src/gateway.ts'
import {
  benchCatalog,
  BENCH_MODEL,
  benchSchema,
  newKey,
  randomPort,
  spawnSimulator,
  standardFile,
} from './lib.ts'

const { values } = parseArgs({
  options: {
    lines: { type: 'string', default: '50000' },
    concurrency: { type: 'string', default: '256' },
    'latency-ms': { type: 'string', default: '50' },
    'poll-ms': { type: 'string', default: '10' },
    store: { type: 'string', default: 'sqlite' },
    'reap-fix': { type: 'boolean', default: false },
  },
})
const lineCount = Number(values.lines)
const concurrency = Number(values.concurrency)
const MODEL = BENCH_MODEL
const allLines = (await Bun.file(await standardFile(MODEL)).text()).split('\n').filter(Boolean)
const measured = allLines.slice(0, lineCount).join('\n') + '\n'
const warmup = allLines.slice(-2000).join('\n') + '\n'

const simulator = await spawnSimulator(
  ['--latency-ms', String(values['latency-ms'])],
  randomPort(19_600),
)
const env: Record<string, string> = {
  PORT: String(randomPort(18_300)),
  HOST: '127.0.0.1',
  MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-trace-')),
  MULTIGRID_ADMIN_TOKEN: 'bench-admin-token-0123456789',
  MULTIGRID_CONFIG: benchCatalog(`${simulator.url}/v1`, concurrency),
  MULTIGRID_POLL_MS: String(values['poll-ms']),
  MULTIGRID_DEFAULT_MAX_OPEN_BATCHES: '1000',
  LOG_LEVEL: 'warn',
}
const schema = values.store === 'postgres' ? await benchSchema() : null
if (schema) env.DATABASE_URL = schema.url
const gateway = await startGateway(loadConfig(env))

if (values['reap-fix']) {
  if (gateway.store.kind !== 'sqlite') throw new Error('--reap-fix is for the SQLite store')
  // The store's private handle; the same statements as SqliteStore.returnToPending otherwise.
  const db = (gateway.store as unknown as { db: Database }).db
  const reap = db.transaction((nowMs: number) => {
    const groups = db
      .query<{ batch_id: string }, [number]>(
        `SELECT batch_id, count(*) AS n FROM lines WHERE status = 'running' AND lease_until < ? GROUP BY +batch_id`,
      )
      .all(nowMs)
    let total = 0
    for (const group of groups) {
      const n = db
        .query(
          `UPDATE lines SET status = 'pending', lease_owner = NULL, lease_until = NULL WHERE batch_id = ? AND status = 'running' AND lease_until < ?`,
        )
        .run(group.batch_id, nowMs).changes
      db.query('UPDATE batches SET running = running - ?, pending = pending + ? WHERE id = ?').run(
        n,
        n,
        group.batch_id,
      )
      total += n
    }
    return total
  })
  Object.assign(gateway.dispatch, {
    reapExpiredLeases: async (nowMs: number) => reap.immediate(nowMs),
  })
}

// Timers around the store's dispatch methods. The dispatcher and recorder call them as methods
// of this same object (gateway.dispatch), so own properties placed over them are what they call.
const methods = [
  'runnableBatches',
  'claimLines',
  'recordOutcomes',
  'batchStatuses',
  'renewLeases',
  'reapExpiredLeases',
  'advanceBatches',
] as const
const spent = new Map<string, { calls: number; ms: number; max: number; items: number }>()
let tracing = false
const store = gateway.dispatch as unknown as Record<
  string,
  (...args: unknown[]) => Promise<unknown>
>
for (const name of methods) {
  const original = store[name].bind(store)
  spent.set(name, { calls: 0, ms: 0, max: 0, items: 0 })
  store[name] = async (...args: unknown[]) => {
    const t = performance.now()
    const result = await original(...args)
    if (tracing) {
      const s = spent.get(name)!
      const ms = performance.now() - t
      s.calls++
      s.ms += ms
      s.max = Math.max(s.max, ms)
      if (name === 'claimLines') s.items += (result as unknown[]).length
      if (name === 'recordOutcomes') s.items += (result as { recorded: number }).recorded
    }
    return result
  }
}

// Event-loop monitor: a 2 ms timer; any lateness beyond that is time the loop was busy.
const stalls: number[] = []
/** When the measured batch's 201 came. */
let t0 = 0
let last = performance.now()
const monitor = setInterval(() => {
  const now = performance.now()
  if (tracing) stalls.push(now - last - 2)
  last = now
}, 2)

const key = await newKey(gateway.url)
const headers = { authorization: `Bearer ${key}` }
/** Runs one batch to completion; `traced`: the timers and the monitor count from its 201 on. */
async function run(body: string, traced: boolean) {
  const response = await fetch(`${gateway.url}/v1/batches`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/jsonl' },
    body,
  })
  if (response.status !== 201) throw new Error(`submit answered ${response.status}`)
  // The ingest is measured by bench/ingest; here only the time the lines run.
  if (traced) {
    tracing = true
    last = performance.now()
    t0 = last
  }
  const { id } = (await response.json()) as { id: string }
  const endAt = performance.now() + 60_000 + lineCount * 10
  while (performance.now() < endAt) {
    const polled = await fetch(`${gateway.url}/v1/batches/${id}`, { headers })
    if (polled.status !== 200) {
      console.error(`poll answered ${polled.status}; this trace includes the outage`)
      await polled.arrayBuffer()
      await Bun.sleep(200)
      continue
    }
    const batch = (await polled.json()) as { status: string }
    if (batch.status === 'completed') return
    if (!['in_progress', 'finalizing', 'validating'].includes(batch.status))
      throw new Error(`batch ended ${batch.status}`)
    await Bun.sleep(200)
  }
  throw new Error('batch did not finish in time')
}

try {
  await run(warmup, false)
  await run(measured, true)
  const wallMs = performance.now() - t0
  tracing = false

  const n = (x: number, digits = 0) =>
    x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits })
  console.log(
    `dispatch trace (${values.store}${values['reap-fix'] ? ', reap fix' : ''}, poll ${values['poll-ms']} ms) of ${n(lineCount)} lines, ${concurrency} in flight: ${n(wallMs)} ms wall, ${n(lineCount / (wallMs / 1000))} lines/s`,
  )
  console.log(
    '  store method        calls    total ms   ms per 1,000 lines   mean ms   max ms   items/call',
  )
  for (const [name, s] of spent) {
    const items = s.items ? n(s.items / s.calls, 1) : ''
    console.log(
      `  ${name.padEnd(18)} ${n(s.calls).padStart(6)} ${n(s.ms).padStart(11)} ${n((s.ms / lineCount) * 1000, 1).padStart(20)} ${n(s.ms / Math.max(1, s.calls), 2).padStart(9)} ${n(s.max, 1).padStart(8)}   ${items}`,
    )
  }
  const late = stalls.filter((x) => x > 0)
  const over = (ms: number) => stalls.filter((x) => x > ms)
  const sum = (list: number[]) => list.reduce((a, b) => a + b, 0)
  // A response arriving at a random moment waits, on average, for the rest of the stall it lands in.
  const residual = sum(late.map((x) => x * x)) / (2 * wallMs)
  console.log(
    `  event loop: an answer arriving at a random moment waits ${n(residual, 1)} ms on average for the loop to be free`,
  )
  console.log(
    `  event loop: busy beyond its 2 ms timer ${n(sum(late))} ms of ${n(wallMs)} (${n((sum(late) / wallMs) * 100)}%); stalls > 10 ms: ${over(10).length} (${n(sum(over(10)))} ms), > 25 ms: ${over(25).length} (${n(sum(over(25)))} ms); longest ${n(Math.max(0, ...stalls), 1)} ms`,
  )
} finally {
  clearInterval(monitor)
  await gateway.stop()
  await simulator.stop()
  await schema?.drop()
}
