/**
 * wrk straight to the simulator: the ceiling of the same work (`concurrency` connections, each
 * request waiting `latencyMs` upstream) measured by a load tool that is not ours, for the
 * dispatch matrix to print beside the gateway. wrk is optional (Debian's `wrk` package): where
 * it is missing this answers null and the matrix says so.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { BENCH_MODEL, randomPort, spawnSimulator } from './lib.ts'

export interface WrkResult {
  rate: number
  meanMs: number
}

/** One chat body like the benchmark's lines, posted by every request. */
const BODY = JSON.stringify({
  model: BENCH_MODEL,
  messages: [{ role: 'user', content: 'Summarise the causes of the French Revolution briefly.' }],
  max_tokens: 64,
})

export async function wrkToSimulator(options: {
  latencyMs: number
  concurrency: number
  seconds: number
}): Promise<WrkResult | null> {
  if (!Bun.which('wrk')) return null
  const simulator = await spawnSimulator(
    ['--latency-ms', String(options.latencyMs)],
    randomPort(17_500),
  )
  const dir = mkdtempSync(join(tmpdir(), 'mg-wrk-'))
  const script = join(dir, 'post.lua')
  writeFileSync(
    script,
    [
      'wrk.method = "POST"',
      'wrk.headers["content-type"] = "application/json"',
      `wrk.body = ${JSON.stringify(BODY)}`,
    ].join('\n'),
  )
  try {
    const run = (seconds: number) =>
      Bun.spawn(
        [
          'wrk',
          '-t2',
          `-c${options.concurrency}`,
          `-d${seconds}s`,
          '--latency',
          '-s',
          script,
          `${simulator.url}/v1/chat/completions`,
        ],
        { stdout: 'pipe', stderr: 'pipe' },
      )
    // A short warm-up opens the connections and warms the simulator's JIT.
    await run(2).exited
    const child = run(options.seconds)
    const text = await new Response(child.stdout).text()
    if ((await child.exited) !== 0) return null
    const rate = /Requests\/sec:\s+([\d.]+)/.exec(text)
    const mean = /Latency\s+([\d.]+)(us|ms|s)/.exec(text)
    if (!rate) return null
    // Refused requests would make the ceiling look higher than the work it stands for.
    const refused = /Non-2xx or 3xx responses:\s+(\d+)/.exec(text)
    if (refused) throw new Error(`wrk saw ${refused[1]} answers that were not 2xx: ${text}`)
    const unit = mean?.[2] === 'us' ? 0.001 : mean?.[2] === 's' ? 1000 : 1
    return { rate: Number(rate[1]), meanMs: mean ? Number(mean[1]) * unit : NaN }
  } finally {
    await simulator.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}
