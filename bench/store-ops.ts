/**
 * Store operations alone: the dispatcher's store traffic for one 50,000-line batch, without HTTP
 * or upstream calls, each operation timed. Keeps `--in-flight` lines leased, as the dispatcher
 * does at full concurrency, and runs the maintenance calls (reap, advance, statuses) once per
 * `--maintenance-every` recorded lines, so their cost can be read at every table fill level.
 * Prints ms per 1,000 lines for claiming and recording, and ms per call for the rest, early
 * (first tenth of the lines) and late (last tenth).
 *
 *   bun bench/store-ops.ts [--store sqlite|postgres] [--lines 50000] [--claim 16] [--record 25]
 *     [--in-flight 256] [--maintenance-every 100]
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { newId } from '../src/domain.ts'
import { startSimulator } from '../src/simulator/server.ts'
import type { ClaimedLine, LineOutcome, OpenedStore } from '../src/store/store.ts'
import { BENCH_MODEL, median, standardFile } from './lib.ts'

const { values } = parseArgs({
  options: {
    store: { type: 'string', default: 'sqlite' },
    lines: { type: 'string', default: '50000' },
    claim: { type: 'string', default: '16' },
    record: { type: 'string', default: '25' },
    'in-flight': { type: 'string', default: '256' },
    'maintenance-every': { type: 'string', default: '100' },
  },
})
const lineCount = Number(values.lines)
const claimSize = Number(values.claim)
const recordSize = Number(values.record)
const inFlightTarget = Number(values['in-flight'])
const maintenanceEvery = Number(values['maintenance-every'])

const texts = (await Bun.file(await standardFile(BENCH_MODEL)).text())
  .split('\n')
  .filter(Boolean)
  .slice(0, lineCount)

// A real simulator answer to the first line, stored as the response of every line.
const simulator = await startSimulator()
const firstBody = {
  ...(JSON.parse(texts[0]) as { body: Record<string, unknown> }).body,
  model: 'sim-chat',
}
const response = await (
  await fetch(`${simulator.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(firstBody),
  })
).text()
await simulator.stop()

let opened: OpenedStore
let dropSchema: (() => Promise<void>) | null = null
if (values.store === 'postgres') {
  const base = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
  const schema = `b_${Math.random().toString(36).slice(2, 10)}`
  const { createPostgresStore } = await import('../src/store/postgres/postgres-store.ts')
  opened = await createPostgresStore(base, { schema })
  dropSchema = async () => {
    const { default: postgres } = await import('postgres')
    const sql = postgres(base, { max: 1, onnotice: () => {} })
    await sql`DROP SCHEMA IF EXISTS ${sql(schema)} CASCADE`
    await sql.end()
  }
} else {
  const { createSqliteStore } = await import('../src/store/sqlite/sqlite-store.ts')
  opened = createSqliteStore(mkdtempSync(join(tmpdir(), 'mg-store-ops-')))
}
const { store, dispatch } = opened

const timings = new Map<string, { at: number; ms: number; n: number }[]>()
async function timed<T>(name: string, done: number, n: number, call: () => Promise<T>): Promise<T> {
  const t = performance.now()
  const result = await call()
  const list = timings.get(name) ?? []
  list.push({ at: done, ms: performance.now() - t, n })
  timings.set(name, list)
  return result
}

try {
  const now = Math.floor(Date.now() / 1000)
  const account = await store.createAccount({
    id: newId('acct_'),
    name: 'bench',
    creditUsd: '100000',
    maxOpenBatches: 100,
    rateLimitPerMinute: 1_000_000,
    createdAt: now,
  })
  const batchId = newId('batch_')
  const t0 = performance.now()
  const admitted = await store.admitBatch({
    id: batchId,
    accountId: account.id,
    name: null,
    endpoint: '/v1/chat/completions',
    completionWindowHours: 24,
    createdAt: now,
    deadlineAt: now + 86_400,
    costCeilingUsd: '500',
    lineCount: texts.length,
    source: 'native',
    metadata: null,
    inputFileId: null,
    idempotencyKey: null,
    lines: texts.map((input, i) => ({ lineNo: i + 1, customId: `req-${i + 1}`, input })),
  })
  if (admitted.kind !== 'created') throw new Error(`admit: ${admitted.kind}`)
  const admitMs = performance.now() - t0

  const owner = newId('inst_')
  const running: ClaimedLine[] = []
  let done = 0
  let nextMaintenance = 0
  const wall = performance.now()
  while (done < texts.length) {
    while (running.length < inFlightTarget) {
      const claimed = await timed('claimLines', done, claimSize, () =>
        dispatch.claimLines({
          batchId,
          owner,
          limit: claimSize,
          nowMs: Date.now(),
          leaseUntilMs: Date.now() + 30_000,
        }),
      )
      if (claimed.length === 0) break
      running.push(...claimed)
    }
    const chunk = running.splice(0, recordSize)
    const outcomes: LineOutcome[] = chunk.map((line) => ({
      batchId,
      lineNo: line.lineNo,
      kind: 'succeeded',
      responseStatus: 200,
      response,
      costUsd: '0.0000234',
      provider: 'bench',
      latencyMs: 50,
    }))
    const { recorded } = await timed('recordOutcomes', done, chunk.length, () =>
      dispatch.recordOutcomes(owner, outcomes, Date.now()),
    )
    if (recorded !== chunk.length) throw new Error(`recorded ${recorded} of ${chunk.length}`)
    done += chunk.length
    if (done >= nextMaintenance) {
      nextMaintenance += maintenanceEvery
      // What the dispatcher's maintenance timer and loop run, in the same order.
      await timed('batchStatuses', done, 0, () => dispatch.batchStatuses([batchId]))
      await timed('reapExpiredLeases', done, 0, () => dispatch.reapExpiredLeases(Date.now()))
      await timed('advanceBatches', done, 0, () =>
        dispatch.advanceBatches(Math.floor(Date.now() / 1000)),
      )
      await timed('runnableBatches', done, 0, () => dispatch.runnableBatches(Date.now(), 100))
      await timed('renewLeases', done, 0, () => dispatch.renewLeases(owner, Date.now() + 30_000))
    }
  }
  const wallMs = performance.now() - wall
  await dispatch.advanceBatches(Math.floor(Date.now() / 1000))

  type Timing = { at: number; ms: number; n: number }
  const early = (list: Timing[]) => list.filter((x) => x.at < texts.length * 0.1)
  const late = (list: Timing[]) => list.filter((x) => x.at >= texts.length * 0.9)
  const per1000 = (list: Timing[]) =>
    (list.reduce((s, x) => s + x.ms, 0) /
      Math.max(
        1,
        list.reduce((s, x) => s + x.n, 0),
      )) *
    1000
  const perCall = (list: Timing[]) => median(list.map((x) => x.ms))
  console.log(
    `store operations (${values.store}), one batch of ${texts.length.toLocaleString('en-US')} lines, ${inFlightTarget} leased at a time, claims of ${claimSize}, records of ${recordSize}:`,
  )
  console.log(`  admitBatch                      ${admitMs.toFixed(0)} ms`)
  console.log(
    `  claim + record loop             ${wallMs.toFixed(0)} ms wall, ${((wallMs / texts.length) * 1000).toFixed(1)} ms per 1,000 lines incl. maintenance every ${maintenanceEvery} lines`,
  )
  for (const name of ['claimLines', 'recordOutcomes']) {
    const list = timings.get(name)!
    console.log(
      `  ${name.padEnd(16)} ${per1000(list).toFixed(1).padStart(7)} ms per 1,000 lines   (first tenth ${per1000(early(list)).toFixed(1)}, last tenth ${per1000(late(list)).toFixed(1)}; median call ${perCall(list).toFixed(2)} ms)`,
    )
  }
  for (const name of [
    'reapExpiredLeases',
    'advanceBatches',
    'batchStatuses',
    'runnableBatches',
    'renewLeases',
  ]) {
    const list = timings.get(name)!
    console.log(
      `  ${name.padEnd(18)} median call ${perCall(list).toFixed(2).padStart(7)} ms   (first tenth ${perCall(early(list)).toFixed(2)} ms, last tenth ${perCall(late(list)).toFixed(2)} ms; ${list.length} calls)`,
    )
  }
} finally {
  await store.close()
  await dropSchema?.()
}
