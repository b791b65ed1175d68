/** Shared helpers for the benches: the standard file, a gateway child process, memory readings. */
import { existsSync, mkdirSync, mkdtempSync, readdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { writeCatalog } from '../test/helpers/catalog.ts'
import { GATEWAY_BUN_ARGS } from '../src/http/head-limit.ts'

export const ROOT = join(import.meta.dir, '..')

/** `--store postgres` benches run here: TEST_DATABASE_URL, or the local server. */
export const BENCH_DATABASE_URL =
  process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test'

/**
 * A schema of its own on the bench database for one gateway: its DATABASE_URL, and `drop()`,
 * which removes it (and says so, rather than failing the bench, if it cannot).
 */
export async function benchSchema(): Promise<{
  url: string
  schema: string
  drop(): Promise<void>
}> {
  const { freshSchemaUrl } = await import('../test/helpers/gateway.ts')
  const { url, schema } = freshSchemaUrl(BENCH_DATABASE_URL)
  return {
    url,
    schema,
    async drop() {
      const { default: postgres } = await import('postgres')
      const sql = postgres(BENCH_DATABASE_URL, { max: 1, onnotice: () => {} })
      await sql`DROP SCHEMA IF EXISTS ${sql(schema)} CASCADE`.catch((error) =>
        console.error(`could not drop schema ${schema}: ${error.message}`),
      )
      await sql.end()
    },
  }
}

/** Bun's arguments for a CPU profile of the gateway, and its markdown summary, in bench/out/prof/. */
export function profileArgs(name: string): string[] {
  const dir = join(ROOT, 'bench/out/prof')
  mkdirSync(dir, { recursive: true })
  return [
    '--cpu-prof',
    '--cpu-prof-md',
    `--cpu-prof-dir=${dir}`,
    `--cpu-prof-name=${name}`,
    // Finer than the default 1 ms: a live call is tens of microseconds.
    '--cpu-prof-interval=125',
  ]
}

/** The standard benchmark file: 50,000 lines, exactly 16 MiB (see bench/gen-jsonl.ts). */
export async function standardFile(model: string): Promise<string> {
  const path = join(ROOT, 'bench/out', `big-${model.replace(/\W/g, '_')}.jsonl`)
  if (!existsSync(path)) {
    const child = Bun.spawn(
      [
        process.execPath,
        join(ROOT, 'bench/gen-jsonl.ts'),
        '--bytes',
        '16777216',
        '--model',
        model,
        '--out',
        path,
      ],
      { stdout: 'ignore' },
    )
    if ((await child.exited) !== 0) throw new Error('gen-jsonl failed')
  }
  return path
}

/** Peak and current resident memory of a process, in bytes, from /proc. */
export async function memoryOf(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await Bun.file(`/proc/${pid}/status`).text()
  const kb = (name: string) =>
    Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024
  return { rss: kb('VmRSS'), peak: kb('VmHWM') }
}

/** Resets a process's peak-RSS mark so the next reading covers only what follows. */
export async function resetPeak(pid: number) {
  await Bun.write(`/proc/${pid}/clear_refs`, '5')
}

export interface GatewayProcess {
  url: string
  pid: number
  env: Record<string, string>
  stop(): Promise<void>
}

/**
 * Starts `src/main.ts` as its own process, so its memory and CPU are its own. `root`: another
 * checkout of the project, to run its gateway beside this one's (bench/proxy.ts --baseline);
 * `stdoutPath`: a file its stdout (the JSON log) goes to, as a log collector would take it,
 * instead of this terminal.
 */
export async function spawnGateway(
  env: Record<string, string>,
  port: number,
  bunArgs: string[] = [],
  { root = ROOT, stdoutPath }: { root?: string; stdoutPath?: string } = {},
): Promise<GatewayProcess> {
  const fullEnv = {
    PATH: process.env.PATH ?? '',
    PORT: String(port),
    HOST: '127.0.0.1',
    MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-bench-')),
    MULTIGRID_ADMIN_TOKEN: 'bench-admin-token-0123456789',
    LOG_LEVEL: 'warn',
    // As `npm start` starts it (package.json), also when a bench is run with `bun bench/…` directly.
    MIMALLOC_PURGE_DELAY: '-1',
    // Runtime tuning under test (JavaScriptCore options, the allocator's) reaches the gateway.
    ...Object.fromEntries(
      Object.entries(process.env).filter(([name]) => /^(BUN_JSC_|MIMALLOC_)/.test(name)),
    ),
    ...env,
  }
  const child = Bun.spawn(
    [process.execPath, ...GATEWAY_BUN_ARGS, ...bunArgs, join(root, 'src/main.ts')],
    {
      env: fullEnv,
      stdout: stdoutPath ? Bun.file(stdoutPath) : 'inherit',
      stderr: 'inherit',
    },
  )
  const url = `http://127.0.0.1:${port}`
  // Up to 30 s: on a busy machine a gateway applying migrations took longer than 5 s to listen.
  let ready = false
  for (let i = 0; i < 600 && !ready; i++) {
    try {
      ready = (await fetch(`${url}/healthz`)).ok
    } catch {}
    if (!ready) await Bun.sleep(50)
  }
  if (!ready) {
    child.kill('SIGTERM')
    throw new Error(`the gateway (${root}) did not answer on port ${port} within 30 s`)
  }
  return {
    url,
    pid: child.pid,
    env: fullEnv,
    async stop() {
      child.kill('SIGTERM')
      await child.exited
    },
  }
}

export async function newKey(url: string, credit = '100000'): Promise<string> {
  const admin = {
    authorization: 'Bearer bench-admin-token-0123456789',
    'content-type': 'application/json',
  }
  const account = (await (
    await fetch(`${url}/admin/v1/accounts`, {
      method: 'POST',
      headers: admin,
      body: JSON.stringify({
        name: 'bench',
        credit_usd: credit,
        max_open_batches: 1000,
        rate_limit_per_minute: 1_000_000,
      }),
    })
  ).json()) as { id: string }
  const key = (await (
    await fetch(`${url}/admin/v1/accounts/${account.id}/keys`, {
      method: 'POST',
      headers: admin,
      body: '{}',
    })
  ).json()) as { key: string }
  return key.key
}

export const median = (values: number[]) =>
  [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
export const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`

/** How many calls `timeOf` times in each of its rounds. */
export const TIMED_CALLS = 20_000
const TIMED_ROUNDS = 5
/** A round is cut short past this, so the timing cannot hang a bench. */
const MAX_ROUND_MS = 5_000

/** µs per call of `work` in this process, the median of 5 rounds of TIMED_CALLS calls. */
export function timeOf(work: () => unknown): number {
  const rounds: number[] = []
  for (let round = 0; round < TIMED_ROUNDS; round++) {
    const started = performance.now()
    let calls = 0
    while (calls < TIMED_CALLS && performance.now() - started < MAX_ROUND_MS) {
      for (let i = 0; i < 100; i++) work()
      calls += 100
    }
    rounds.push(((performance.now() - started) * 1000) / calls)
  }
  return median(rounds)
}

const portsHandedOut = new Set<number>()

/**
 * A random port in a range the benches keep to themselves, never one this process was already
 * given: a bench's ranges overlap (a gateway's and its simulator's), and a repeat made the
 * gateway find its port taken.
 */
export function randomPort(base: number): number {
  let port: number
  do port = base + Math.floor(Math.random() * 500)
  while (portsHandedOut.has(port))
  portsHandedOut.add(port)
  return port
}

export interface SimulatorProcess {
  url: string
  pid: number
  stop(): Promise<void>
}

/**
 * This process's environment with the allocator's setting the npm scripts give a server
 * (package.json), unless this process has its own: for the simulator and the minimal proxy.
 */
export function serverProcessEnv(): Record<string, string | undefined> {
  return { ...process.env, MIMALLOC_PURGE_DELAY: process.env.MIMALLOC_PURGE_DELAY ?? '-1' }
}

/**
 * Starts the upstream simulator as its own process (`src/simulator/main.ts`), so it does not
 * share an event loop with the gateway or the load generator. `args` are its flags.
 */
export async function spawnSimulator(args: string[], port: number): Promise<SimulatorProcess> {
  const env = serverProcessEnv()
  const child = Bun.spawn(
    [process.execPath, join(ROOT, 'src/simulator/main.ts'), '--port', String(port), ...args],
    { env, stdout: 'ignore', stderr: 'inherit' },
  )
  const url = `http://127.0.0.1:${port}`
  let ready = false
  for (let i = 0; i < 100 && !ready; i++) {
    try {
      ready = (await fetch(`${url}/v1/models`)).ok
    } catch {}
    if (!ready) await Bun.sleep(50)
  }
  if (!ready) {
    child.kill('SIGTERM')
    throw new Error(`the simulator did not answer on port ${port} within 5 s`)
  }
  return {
    url,
    pid: child.pid,
    async stop() {
      child.kill('SIGTERM')
      await child.exited
    },
  }
}

let ticksPerSecond = 0

/** CPU time (user + system) a process has used so far, in milliseconds, from /proc/<pid>/stat. */
export async function cpuMs(pid: number): Promise<number> {
  return statCpuMs(await Bun.file(`/proc/${pid}/stat`).text())
}

/** CPU time per thread (by thread name, summed over threads of the same name), in milliseconds. */
export async function threadCpuMs(pid: number): Promise<Map<string, number>> {
  const threads = new Map<string, number>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = await Bun.file(`/proc/${pid}/task/${tid}/stat`).text()
      const name =
        tid === String(pid) ? 'main (JS)' : stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      threads.set(name, (threads.get(name) ?? 0) + statCpuMs(stat))
    } catch {} // the thread ended between the listing and the read
  }
  return threads
}

/** CPU ms each thread used between two readings of threadCpuMs. */
export function threadCpuMsBetween(before: Map<string, number>, after: Map<string, number>) {
  const used = new Map<string, number>()
  for (const [name, ms] of after) used.set(name, ms - (before.get(name) ?? 0))
  return used
}

function statCpuMs(stat: string): number {
  if (ticksPerSecond === 0) {
    const out = Bun.spawnSync(['getconf', 'CLK_TCK']).stdout.toString().trim()
    ticksPerSecond = Number(out) || 100
  }
  // Fields after the parenthesised name: state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond
}

/** The `q` quantile of already sorted values. */
export const quantile = (sorted: number[], q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]

export interface LoopResult {
  /** Wall time from the first request to the last answer, in milliseconds. */
  elapsedMs: number
  /** Latency of each counted request, in milliseconds, sorted. */
  latencies: number[]
  ok: number
  failed: number
}

/**
 * A closed loop: `concurrency` workers send `total` requests between them, each sending its next
 * one when the previous answered. Stops early at `maxMs` so a stuck target cannot hang a bench.
 */
export function closedLoop(options: {
  concurrency: number
  total: number
  maxMs: number
  send: (i: number) => Promise<boolean>
}): Promise<LoopResult> {
  return handOnLoop(options, (i) => options.send(i))
}

/**
 * closedLoop for a client that can start its next request from inside an answer: `send` gets
 * `onAnswered`, to call once request i's answer has arrived (or never); the next request starts
 * then, or when send settles, whichever is first. Latency is send's whole time.
 */
export function handOnLoop(
  options: { concurrency: number; total: number; maxMs: number },
  send: (i: number, onAnswered: () => void) => Promise<boolean>,
): Promise<LoopResult> {
  const latencies: number[] = []
  let next = 0
  let ok = 0
  let failed = 0
  let running = 0
  const started = performance.now()
  const endAt = started + options.maxMs
  return new Promise((resolve) => {
    const finish = () => {
      latencies.sort((a, b) => a - b)
      resolve({ elapsedMs: performance.now() - started, latencies, ok, failed })
    }
    const launch = () => {
      if (next >= options.total || performance.now() >= endAt) return
      const i = next++
      running++
      const t = performance.now()
      let handedOn = false
      const handOn = () => {
        if (handedOn) return
        handedOn = true
        launch()
      }
      send(i, handOn)
        .catch(() => false)
        .then((success) => {
          latencies.push(performance.now() - t)
          if (success) ok++
          else failed++
          running--
          handOn()
          if (running === 0) finish()
        })
    }
    for (let k = 0; k < options.concurrency; k++) launch()
    if (running === 0) finish()
  })
}

/** Busy and total CPU time of the whole machine so far, in clock ticks, from /proc/stat. */
export async function machineTicks(): Promise<{ busy: number; total: number }> {
  const cpu = (await Bun.file('/proc/stat').text())
    .split('\n')[0]
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number)
  const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0)
  const idle = cpu[3] + cpu[4] // idle + iowait
  return { busy: total - idle, total }
}

/**
 * Time a thread has spent running and waiting on a run queue (runnable, but no core free), in
 * milliseconds, from /proc/<pid>/task/<tid>/schedstat. The main thread's tid is the pid.
 */
export async function schedMs(pid: number, tid = pid): Promise<{ runMs: number; waitMs: number }> {
  const [run, wait] = (await Bun.file(`/proc/${pid}/task/${tid}/schedstat`).text())
    .trim()
    .split(/\s+/)
    .map(Number)
  return { runMs: run / 1e6, waitMs: wait / 1e6 }
}

/** CPU time of every process with this command name (e.g. all `postgres` backends), by pid, in ms. */
export async function cpuByName(comm: string): Promise<Map<number, number>> {
  const result = new Map<number, number>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      if ((await Bun.file(`/proc/${entry}/comm`).text()).trim() !== comm) continue
      result.set(Number(entry), await cpuMs(Number(entry)))
    } catch {} // the process ended between the listing and the read
  }
  return result
}

/** CPU used between two `cpuByName` readings; processes started in between count from zero. */
export function cpuBetween(before: Map<number, number>, after: Map<number, number>): number {
  let total = 0
  for (const [pid, ms] of after) total += ms - (before.get(pid) ?? 0)
  return total
}

/** The one model every bench runs lines of. */
export const BENCH_MODEL = 'bench/chat'

/** A providers file with one chat model on one OpenAI-compatible upstream (a simulator), at gpt-5-nano's prices. */
export function benchCatalog(baseUrl: string, maxConcurrency: number): string {
  return writeCatalog({
    providers: {
      bench: { kind: 'openai', base_url: baseUrl, max_concurrency: maxConcurrency, timeout_s: 60 },
    },
    models: [
      {
        id: BENCH_MODEL,
        endpoints: ['chat'],
        context_tokens: 128000,
        max_output_tokens: 4096,
        offerings: [
          {
            provider: 'bench',
            upstream_model: 'sim-chat',
            input_usd_per_mtok: '0.05',
            output_usd_per_mtok: '0.40',
          },
        ],
      },
    ],
  })
}
