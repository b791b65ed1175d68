/**
 * Results streaming: a completed batch of the standard 50,000-line file, its results downloaded
 * (`GET /v1/batches/{id}/results`), beside the raw limit measured in the same run: the same bytes
 * served by a plain Bun server from memory, downloaded by the same client. Then fairness: while
 * --parallel downloads of it run at once, another client asks `/healthz` every 10 ms, and its
 * latencies say how long the downloads hold everyone else's calls.
 *
 *   bun bench/results.ts [--runs 5] [--parallel 32] [--store sqlite|postgres]
 */
import { parseArgs } from 'node:util'
import {
  benchCatalog,
  benchSchema,
  BENCH_MODEL,
  median,
  mib,
  newKey,
  quantile,
  randomPort,
  spawnGateway,
  spawnSimulator,
  standardFile,
} from './lib.ts'

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    parallel: { type: 'string', default: '32' },
    store: { type: 'string', default: 'sqlite' },
  },
})
const runs = Number(values.runs)
const parallel = Number(values.parallel)
const bytes = await Bun.file(await standardFile(BENCH_MODEL)).bytes()

const simulator = await spawnSimulator(['--latency-ms', '0'], randomPort(19_700))
const schema = values.store === 'postgres' ? await benchSchema() : null
const gateway = await spawnGateway(
  {
    MULTIGRID_CONFIG: benchCatalog(`${simulator.url}/v1`, 256),
    ...(schema && { DATABASE_URL: schema.url }),
  },
  randomPort(18_700),
)
const key = await newKey(gateway.url)
const auth = { authorization: `Bearer ${key}` }

const submitted = await fetch(`${gateway.url}/v1/batches`, {
  method: 'POST',
  headers: { ...auth, 'content-type': 'application/jsonl' },
  body: bytes,
})
if (submitted.status !== 201) throw new Error(`submit answered ${submitted.status}`)
const { id } = (await submitted.json()) as { id: string }
// Bounded: 50,000 lines at 256 in flight against a simulator answering at once take seconds.
for (let polls = 0; ; polls++) {
  const { status } = (await (
    await fetch(`${gateway.url}/v1/batches/${id}`, { headers: auth })
  ).json()) as { status: string }
  if (status === 'completed') break
  if (status !== 'in_progress' && status !== 'validating' && status !== 'finalizing')
    throw new Error(`the batch ended ${status}`)
  if (polls > 1200) throw new Error('the batch did not complete within 2 minutes')
  await Bun.sleep(100)
}
const resultsUrl = `${gateway.url}/v1/batches/${id}/results`

/** One download, read to its end: its bytes and milliseconds. */
async function download(url: string, headers: Record<string, string> = {}) {
  const t = performance.now()
  const response = await fetch(url, { headers })
  if (!response.ok) throw new Error(`${url} answered ${response.status}`)
  let size = 0
  const reader = response.body!.getReader()
  for (let read = await reader.read(); !read.done; read = await reader.read())
    size += read.value.byteLength
  return { size, ms: performance.now() - t }
}

// The raw limit: the same bytes from memory, in chunks of the size the gateway writes.
const results = new Uint8Array(await (await fetch(resultsUrl, { headers: auth })).arrayBuffer())
const plain = Bun.serve({
  port: 0,
  hostname: '127.0.0.1',
  fetch: () =>
    new Response(
      new ReadableStream({
        start(controller) {
          for (let at = 0; at < results.length; at += 256 * 1024)
            controller.enqueue(results.subarray(at, at + 256 * 1024))
          controller.close()
        },
      }),
    ),
})

const gatewayMs: number[] = []
const plainMs: number[] = []
for (let i = 0; i < runs + 1; i++) {
  const ours = await download(resultsUrl, auth)
  const theirs = await download(`http://127.0.0.1:${plain.port}/`)
  if (ours.size !== results.length) throw new Error('a download ended short')
  if (i === 0) continue // the first warms the JIT
  gatewayMs.push(ours.ms)
  plainMs.push(theirs.ms)
}

/** /healthz every 10 ms while `work` runs: its latencies, sorted. */
async function healthzDuring(work: Promise<unknown>) {
  const latencies: number[] = []
  let done = false
  void work.finally(() => (done = true))
  while (!done) {
    const t = performance.now()
    await fetch(`${gateway.url}/healthz`)
    latencies.push(performance.now() - t)
    await Bun.sleep(10)
  }
  await work
  return latencies.sort((a, b) => a - b)
}
const idle = await healthzDuring(Bun.sleep(2000))
const t = performance.now()
const busy = await healthzDuring(
  Promise.all(Array.from({ length: parallel }, () => download(resultsUrl, auth))),
)
const parallelMs = performance.now() - t

plain.stop()
await gateway.stop()
await simulator.stop()
await schema?.drop()

const ms = median(gatewayMs)
const rawMs = median(plainMs)
const rate = (size: number, took: number) =>
  `${(size / 1024 / 1024 / (took / 1000)).toFixed(0)} MiB/s`
const latency = (sorted: number[]) =>
  `p50 ${quantile(sorted, 0.5).toFixed(1)} ms, p99 ${quantile(sorted, 0.99).toFixed(1)} ms, max ${sorted.at(-1)!.toFixed(1)} ms (${sorted.length} calls)`
console.log(`results (${values.store}) of 50,000 lines, ${mib(results.length)}, median of ${runs}:`)
console.log(
  `  gateway GET …/results      ${ms.toFixed(0).padStart(5)} ms   ${rate(results.length, ms)}, ${Math.round(50_000 / (ms / 1000)).toLocaleString('en')} lines/s`,
)
console.log(
  `  same bytes from memory     ${rawMs.toFixed(0).padStart(5)} ms   ${rate(results.length, rawMs)}`,
)
console.log(`  ratio                      ${(ms / rawMs).toFixed(2)}× the plain server`)
console.log(
  `  ${parallel} downloads at once  ${parallelMs.toFixed(0).padStart(5)} ms   ${rate(results.length * parallel, parallelMs)} in all`,
)
console.log(`  /healthz meanwhile         ${latency(busy)}`)
console.log(`  /healthz idle              ${latency(idle)}`)
