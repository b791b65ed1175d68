/**
 * Summarises a `.cpuprofile` (Bun's --cpu-prof): inclusive time per function (each sample counted
 * once per function on its stack), the functions that matter for dispatch first, then the
 * heaviest others. `--per N` also prints each as ms per 1,000 of N units (lines, requests).
 *
 *   bun bench/prof-summary.ts bench/out/prof/dispatch-sqlite-run1.cpuprofile [--per 52000] [--top 25]
 *     [--who writeBuffered]
 *
 * --who NAME: for the samples spent in NAME itself, which caller outside Node's own modules
 * (node:, internal:) they came from, e.g. whether socket writes are the HTTP client's or the
 * database driver's.
 */
import { basename } from 'node:path'
import { parseArgs } from 'node:util'

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    per: { type: 'string' },
    top: { type: 'string', default: '25' },
    who: { type: 'string' },
  },
})
if (positionals.length !== 1)
  throw new Error('usage: bun bench/prof-summary.ts <file.cpuprofile> [--per N] [--top 25]')

interface Node {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}
const profile = (await Bun.file(positionals[0]).json()) as {
  nodes: Node[]
  samples: number[]
  timeDeltas: number[]
}

const parent = new Map<number, number>()
const byId = new Map<number, Node>()
for (const node of profile.nodes) {
  byId.set(node.id, node)
  for (const child of node.children ?? []) parent.set(child, node.id)
}
const label = (node: Node) => {
  const { functionName, url, lineNumber } = node.callFrame
  const name = functionName || '(anonymous)'
  return url ? `${name} ${basename(url)}:${lineNumber + 1}` : name
}

// A sample after the process slept carries the whole gap as its delta; cap each at three
// sampling intervals so a gap is not charged to whatever ran next.
const interval =
  [...profile.timeDeltas].sort((a, b) => a - b)[profile.timeDeltas.length >> 1] || 1000
/** Where a sample's time belongs: the library or layer of the nearest frame with a source file. */
/** The gateway's upstream HTTP client: its transport, pool and response. */
const UPSTREAM_CLIENT = /\/providers\/(h1-connection|connection-pool|http-client)\.ts/

function category(leaf: number): string {
  let id: number | undefined = leaf
  while (id !== undefined) {
    const { url, functionName } = byId.get(id)!.callFrame
    if (url) {
      const frame = label(byId.get(id)!)
      selfByFrame.set(frame, (selfByFrame.get(frame) ?? 0) + currentUs)
      if (url.includes('node_modules/undici') || UPSTREAM_CLIENT.test(url))
        return 'HTTP client (providers/ transport, or undici)'
      if (url.startsWith('bun:sqlite') || url.includes('/src/store/'))
        return 'store (SQL, bun:sqlite / postgres.js)'
      if (url.includes('node_modules/postgres/')) return 'store (SQL, bun:sqlite / postgres.js)'
      if (url.includes('decimal.js')) return 'money (decimal.js)'
      if (url.includes('/src/telemetry/') || url.includes('@opentelemetry')) return 'telemetry'
      if (url.includes('node_modules/elysia')) return 'HTTP server (Elysia)'
      if (url.startsWith('node:') || url.startsWith('internal:'))
        return 'Node compatibility (net, streams, events)'
      if (url.includes('node_modules/')) return 'other libraries'
      return 'gateway code (src/, providers/)'
    }
    if (functionName === '(garbage collector)') return 'garbage collector'
    id = parent.get(id)
  }
  return 'native, no JS caller (I/O, timers, GC, JIT)'
}

const inclusive = new Map<string, number>()
const categories = new Map<string, number>()
/** Self time by the nearest JS frame (a native leaf is charged to the JS function that called it). */
const selfByFrame = new Map<string, number>()
let currentUs = 0
const whoCallers = new Map<string, number>()
let totalUs = 0
let idleUs = 0
for (let i = 0; i < profile.samples.length; i++) {
  const us = Math.min(profile.timeDeltas[i] ?? 0, 3 * interval)
  totalUs += us
  let id: number | undefined = profile.samples[i]
  if (byId.get(id)?.callFrame.functionName === '(idle)') {
    idleUs += us
    continue
  }
  currentUs = us
  if (values.who && byId.get(id)!.callFrame.functionName === values.who) {
    let up: number | undefined = id
    let caller = '(no caller outside node:)'
    while (up !== undefined) {
      const frame = byId.get(up)!.callFrame
      if (frame.url && !frame.url.startsWith('node:') && !frame.url.startsWith('internal:')) {
        caller = label(byId.get(up)!)
        break
      }
      up = parent.get(up)
    }
    whoCallers.set(caller, (whoCallers.get(caller) ?? 0) + us)
  }
  const where = category(id)
  categories.set(where, (categories.get(where) ?? 0) + us)
  const seen = new Set<string>()
  while (id !== undefined) {
    const node = byId.get(id)!
    const name = label(node)
    if (!seen.has(name)) {
      seen.add(name)
      inclusive.set(name, (inclusive.get(name) ?? 0) + us)
    }
    id = parent.get(id)
  }
}

const per = values.per ? Number(values.per) : null
const row = (name: string, us: number) => {
  const ms = us / 1000
  const share = ((us / (totalUs - idleUs)) * 100).toFixed(1).padStart(5)
  const rate = per ? `   ${((ms / per) * 1000).toFixed(1).padStart(7)} ms per 1,000` : ''
  return `  ${ms.toFixed(0).padStart(7)} ms  ${share}% of busy${rate}   ${name}`
}
console.log(
  `${basename(positionals[0])}: ${(totalUs / 1e6).toFixed(1)} s sampled (${profile.samples.length} samples, ${interval} µs apart), ${((totalUs - idleUs) / 1e6).toFixed(1)} s busy`,
)
console.log('by layer (self time, native calls charged to their nearest JS caller):')
for (const [name, us] of [...categories].sort((a, b) => b[1] - a[1])) console.log(row(name, us))
// Dispatch's own seams first, by function name (any file).
const seams = [
  'reapExpiredLeases',
  'returnToPending',
  'recordOutcomes',
  'claimLines',
  'advanceBatches',
  'runnableBatches',
  'batchStatuses',
  'renewLeases',
  'charge',
  'runLine',
  'postJson',
  'send',
  'priceUsage',
  'admitBatch',
  'getBatch',
]
console.log('dispatch seams (inclusive):')
for (const seam of seams) {
  const matches = [...inclusive].filter(
    ([name]) => name.split(' ')[0].replace(/^async /, '') === seam,
  )
  for (const [name, us] of matches) console.log(row(name, us))
}
console.log(`heaviest by self time (native leaves charged to their JS caller), top ${values.top}:`)
for (const [name, us] of [...selfByFrame].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top)))
  console.log(row(name, us))
console.log(`heaviest (inclusive), top ${values.top}:`)
const skip = /^(\(root\)|\(program\)|processTicksAndRejections|\(anonymous\)$|anonymous$)/
for (const [name, us] of [...inclusive]
  .filter(([name]) => !skip.test(name))
  .sort((a, b) => b[1] - a[1])
  .slice(0, Number(values.top)))
  console.log(row(name, us))
if (values.who) {
  console.log(`${values.who}: by nearest caller outside node: / internal:`)
  for (const [name, us] of [...whoCallers].sort((a, b) => b[1] - a[1]).slice(0, 10))
    console.log(row(name, us))
}
