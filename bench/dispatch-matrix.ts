/**
 * Dispatch at both sizes on both stores in one run: bench/dispatch.ts for 20,000 and 50,000 lines
 * on SQLite and on PostgreSQL (BENCH_DATABASE_URL: TEST_DATABASE_URL or the local server), each
 * beside the plain client straight to the simulator in the same run, then one table of the
 * ratios: POST → completed against the ideal (concurrency ÷ latency) and against the plain
 * client. Every other argument is passed on (`--runs 5`, `--latency-ms 50`, ...).
 *
 *   bun bench/dispatch-matrix.ts [--sizes 20000,50000] [--stores sqlite,postgres] [dispatch.ts options]
 */
import { join } from 'node:path'

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

interface Row {
  store: string
  lines: number
  rate: string
  ofIdeal: string
  ofPlain: string
  cpu: string
}

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

console.log('dispatch, POST → completed, median per row:')
console.log('  store     lines    lines/s  of ideal  of plain client  gateway CPU µs/line')
for (const row of rows)
  console.log(
    `  ${row.store.padEnd(9)} ${row.lines.toLocaleString('en-US').padStart(6)} ${row.rate.padStart(10)} ${row.ofIdeal.padStart(9)} ${row.ofPlain.padStart(16)} ${row.cpu.padStart(20)}`,
  )
