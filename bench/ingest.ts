/**
 * Ingest: POST the standard 16 MiB / 50,000-line file and time until the 201, with the gateway's
 * peak memory growth, beside the raw limit measured in the same run: plain read + split +
 * JSON.parse of the same file in a fresh process.
 *
 *   bun bench/ingest.ts [--runs 5] [--store sqlite|postgres] [--profile]
 */
import { parseArgs } from 'node:util'
import {
  benchSchema,
  memoryOf,
  median,
  mib,
  newKey,
  profileArgs,
  randomPort,
  resetPeak,
  spawnGateway,
  standardFile,
  benchCatalog,
  BENCH_MODEL,
} from './lib.ts'

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    store: { type: 'string', default: 'sqlite' },
    profile: { type: 'boolean', default: false },
  },
})
const runs = Number(values.runs)
const file = await standardFile(BENCH_MODEL)
const bytes = await Bun.file(file).bytes()

// The raw limit, each run in its own process so its memory is its own. Two plain ways:
// - whole: the file read as one string, split, each line parsed (the reference the issue names);
// - by line: the bytes split at newlines and each line decoded on its own, then parsed. Faster
//   on this file (most lines decode to one-byte strings, which JSON.parse reads faster), and the
//   way the gateway reads a body; printed so the ratio can be read against the faster of the two.
const plainWays = {
  whole: `
    const text = await Bun.file(FILE).text()
    for (const line of text.split('\\n')) if (line) JSON.parse(line)`,
  byLine: `
    const bytes = Buffer.from(await Bun.file(FILE).bytes())
    for (let start = 0; start < bytes.length; ) {
      let end = bytes.indexOf(10, start)
      if (end < 0) end = bytes.length
      if (end > start) JSON.parse(bytes.toString('utf8', start, end))
      start = end + 1
    }`,
}
async function plainRun(way: string): Promise<{ ms: number; growth: number }> {
  const child = Bun.spawn(
    [
      process.execPath,
      '-e',
      `
    const FILE = ${JSON.stringify(file)}
    const before = Number(/VmRSS:\\s+(\\d+)/.exec(await Bun.file('/proc/self/status').text())[1]) * 1024
    const t = performance.now()
    ${way}
    const ms = performance.now() - t
    const peak = Number(/VmHWM:\\s+(\\d+)/.exec(await Bun.file('/proc/self/status').text())[1]) * 1024
    console.log(JSON.stringify({ ms, growth: peak - before }))
  `,
    ],
    { stdout: 'pipe' },
  )
  return JSON.parse(await new Response(child.stdout).text()) as { ms: number; growth: number }
}
const raw: number[] = []
const rawByLine: number[] = []
let referencePeak = 0
for (let i = 0; i < runs; i++) {
  const whole = await plainRun(plainWays.whole)
  raw.push(whole.ms)
  referencePeak = Math.max(referencePeak, whole.growth)
  rawByLine.push((await plainRun(plainWays.byLine)).ms)
}

const catalog = benchCatalog('http://127.0.0.1:9/v1', 64)
const env: Record<string, string> = {
  MULTIGRID_CONFIG: catalog,
  MULTIGRID_DISPATCH: '0',
  MULTIGRID_DEFAULT_MAX_OPEN_BATCHES: '1000',
}
const schema = values.store === 'postgres' ? await benchSchema() : null
if (schema) env.DATABASE_URL = schema.url
// --profile: the gateway's CPU profile to bench/out/prof/ (summarise with bench/prof-summary.ts).
const gateway = await spawnGateway(
  env,
  randomPort(18_400),
  values.profile ? profileArgs(`ingest-${values.store}`) : [],
)
const key = await newKey(gateway.url)
const times: number[] = []
let growth = 0
for (let i = 0; i < runs + 1; i++) {
  const before = await memoryOf(gateway.pid)
  await resetPeak(gateway.pid)
  const t = performance.now()
  const response = await fetch(`${gateway.url}/v1/batches`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/jsonl' },
    body: bytes,
  })
  const ms = performance.now() - t
  if (response.status !== 201)
    throw new Error(`submit answered ${response.status}: ${(await response.text()).slice(0, 300)}`)
  await response.arrayBuffer()
  const after = await memoryOf(gateway.pid)
  if (i > 0) {
    times.push(ms) // the first run warms the JIT
    growth = Math.max(growth, after.peak - before.rss)
  }
}
await gateway.stop()
await schema?.drop()

const ingest = median(times)
const plain = median(raw)
const plainByLine = median(rawByLine)
console.log(
  `ingest (${values.store}) of ${mib(bytes.byteLength)} / 50,000 lines, median of ${runs}:`,
)
console.log(
  `  gateway POST → 201          ${ingest.toFixed(0).padStart(4)} ms   peak memory growth ${mib(growth)} (${(growth / bytes.byteLength).toFixed(2)}× the file)`,
)
console.log(
  `  read + split + parse        ${plain.toFixed(0).padStart(4)} ms   peak memory growth ${mib(referencePeak)}`,
)
console.log(`  same, each line decoded     ${plainByLine.toFixed(0).padStart(4)} ms`)
console.log(
  `  ratio                       ${(ingest / plain).toFixed(2)}× the plain parse, ${(ingest / plainByLine).toFixed(2)}× the line-by-line one`,
)
