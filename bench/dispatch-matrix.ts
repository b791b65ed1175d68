/**
 * Dispatch at both sizes on both stores in one run: bench/dispatch.ts for 20,000 and 50,000 lines
 * on SQLite and on PostgreSQL (BENCH_DATABASE_URL: TEST_DATABASE_URL or the local server), each
 * beside the plain client straight to the simulator in the same run, then one table of the
 * ratios: POST → completed against the ideal (concurrency ÷ latency) and against the plain
 * client. Every other argument is passed on (`--runs 5`, `--latency-ms 50`, ...). Before the first
 * row and after the last, wrk (where installed) drives the same simulator straight, at the same
 * concurrency and latency: the table gives each row against the mean of the two.
 *
 *   bun bench/dispatch-matrix.ts [--sizes 20000,50000] [--stores sqlite,postgres] [dispatch.ts options]
 */
import { join } from 'node:path'
import { wrkToSimulator, type WrkResult } from './wrk.ts'

const OWN = ['--sizes', '--stores']
const values: Record<string, string> = { sizes: '20000,50000', stores: 'sqlite,postgres' }
/** The arguments passed on to dispatch.ts: all but this script's own. */
const passed: string[] = []
const args = process.argv.slice(2)
for (let i = 0; i < args.length; i++) {
  const [name, inline] = args[i]!.split('=', 2) as [string, string | undefined]
  if (!OWN.includes(name)) passed.push(args[i]!)
  else values[name.slice(2)] = inline ?? args[++i] ?? ''
}

// dispatch.ts's own --lines and --store would silently run every row at one size or store.
const instead: Record<string, string> = { '--lines': '--sizes', '--store': '--stores' }
for (const arg of passed) {
  const name = arg.split('=', 1)[0]!
  if (instead[name]) {
    console.error(
      `bench:dispatch runs every size and store itself: use ${instead[name]}, not ${name}`,
    )
    process.exit(2)
  }
}

interface Row {
  store: string
  lines: number
  rate: string
  ofIdeal: string
  ofPlain: string
  cpu: string
}

/** A value dispatch.ts is given, or its default there. */
const passedValue = (name: string, fallback: number) => {
  const at = passed.findIndex((arg) => arg === name || arg.startsWith(`${name}=`))
  if (at < 0) return fallback
  return Number(passed[at]!.includes('=') ? passed[at]!.split('=')[1] : passed[at + 1])
}
const concurrency = passedValue('--concurrency', 256)
const latencyMs = passedValue('--latency-ms', 50)
const wrk = () => wrkToSimulator({ latencyMs, concurrency, seconds: 10 })
const wrkRuns: (WrkResult | null)[] = [await wrk()]

const rows: Row[] = []
for (const store of String(values.stores).split(','))
  for (const lines of String(values.sizes).split(',').map(Number)) {
    const child = Bun.spawn(
      [
        process.execPath,
        join(import.meta.dir, 'dispatch.ts'),
        '--store',
        store,
        '--lines',
        String(lines),
        ...passed,
      ],
      { stdout: 'pipe', stderr: 'inherit', env: process.env },
    )
    const text = await new Response(child.stdout).text()
    process.stdout.write(text + '\n')
    if ((await child.exited) !== 0) {
      rows.push({ store, lines, rate: 'failed', ofIdeal: '', ofPlain: '', cpu: '' })
      continue
    }
    const total =
      /POST → completed\s+([\d,]+) lines\/s\s+(\d+)% of ideal, (\d+)% of the simulator alone/.exec(
        text,
      )
    const cpu = /gateway CPU\s+([\d,]+) µs\/line/.exec(text)
    rows.push({
      store,
      lines,
      rate: total?.[1] ?? '?',
      ofIdeal: total ? `${total[2]}%` : '?',
      ofPlain: total ? `${total[3]}%` : '?',
      cpu: cpu?.[1] ?? '?',
    })
  }

wrkRuns.push(await wrk())
const measured = wrkRuns.filter((run): run is WrkResult => run !== null)
const wrkRate = measured.length
  ? measured.reduce((sum, run) => sum + run.rate, 0) / measured.length
  : null
const ideal = concurrency / (latencyMs / 1000)
const n = (value: number) => Math.round(value).toLocaleString('en-US')

console.log('dispatch, POST → completed, median per row:')
console.log('  store     lines    lines/s  of ideal  of plain client   of wrk  gateway CPU µs/line')
for (const row of rows) {
  const rate = Number(row.rate.replaceAll(',', ''))
  const ofWrk = wrkRate && Number.isFinite(rate) ? `${Math.round((rate / wrkRate) * 100)}%` : '–'
  console.log(
    `  ${row.store.padEnd(9)} ${row.lines.toLocaleString('en-US').padStart(6)} ${row.rate.padStart(10)} ${row.ofIdeal.padStart(9)} ${row.ofPlain.padStart(16)} ${ofWrk.padStart(8)} ${row.cpu.padStart(20)}`,
  )
}
console.log(`  ideal (concurrency ÷ latency): ${n(ideal)} requests/s`)
console.log(
  wrkRate === null
    ? '  wrk: not installed (Debian package wrk), so no column against it'
    : `  wrk straight to the simulator, ${concurrency} connections, before and after the rows: ${measured.map((run) => `${n(run.rate)} requests/s (mean ${run.meanMs.toFixed(1)} ms)`).join(', ')}: ${Math.round((wrkRate / ideal) * 100)}% of ideal`,
)
