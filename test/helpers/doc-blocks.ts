/**
 * The documentation's code blocks, taken word for word from the Markdown files they live in, and
 * shell walk-throughs run as a reader runs them: pasted into one fresh bash, from a checkout, with
 * only `PORT`, `SIM_PORT`, `MULTIGRID_DATA_DIR` and `MULTIGRID_CONFIG` pointed elsewhere (the
 * blocks honour them), and without Bun on the PATH (`npm install` does not put it there).
 */
import { existsSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { freePort } from './process-gateway.ts'

export const ROOT = join(import.meta.dir, '../..')

/** A documentation file, by its path from the repository's root. */
export const readDoc = (path: string) => readFileSync(join(ROOT, path), 'utf8')

/**
 * The fenced blocks of `lang` in the section that starts at the heading `heading` (to the next
 * heading of the same or a higher level), in order.
 */
export function sectionBlocks(markdown: string, heading: string, lang: string): string[] {
  const lines = markdown.split('\n')
  const start = lines.indexOf(heading)
  if (start < 0) throw new Error(`no heading "${heading}"`)
  const level = heading.indexOf(' ')
  const blocks: string[] = []
  let open: { lang: string; lines: string[] } | null = null
  for (const line of lines.slice(start + 1)) {
    if (open) {
      if (line.startsWith('```')) {
        if (open.lang === lang) blocks.push(open.lines.join('\n') + '\n')
        open = null
      } else open.lines.push(line)
    } else if (line.startsWith('```')) {
      open = { lang: line.slice(3).trim(), lines: [] }
    } else if (/^#+ /.test(line) && line.indexOf(' ') <= level) {
      break
    }
  }
  return blocks
}

export interface WalkthroughRun {
  /** The directory the blocks ran in: what they wrote (requests.jsonl, results.jsonl, logs). */
  dir: string
  code: number
  stdout: string
  stderr: string
}

/**
 * Runs `script` in one non-interactive bash, in a fresh directory that holds what a checkout
 * holds (linked), with the simulator and the gateway on free ports and a store of its own.
 * The bash runs in a process group of its own, killed whole when it is done or out of time;
 * `env` overrides what it is given.
 */
export async function runWalkthrough(
  script: string,
  timeoutMs: number,
  env: Record<string, string> = {},
): Promise<WalkthroughRun> {
  const dir = mkdtempSync(join(tmpdir(), 'mg-walkthrough-'))
  for (const entry of [
    'package.json',
    'package-lock.json',
    'tsconfig.json',
    'src',
    'providers',
    'node_modules',
  ]) {
    symlinkSync(join(ROOT, entry), join(dir, entry))
  }
  const simPort = freePort()
  const catalog = readFileSync(join(ROOT, 'providers/catalog.simulator.json'), 'utf8')
  if (!catalog.includes('127.0.0.1:8090'))
    throw new Error('the simulator catalog no longer names :8090')
  writeFileSync(
    join(dir, 'catalog.json'),
    catalog.replaceAll('127.0.0.1:8090', `127.0.0.1:${simPort}`),
  )
  writeFileSync(join(dir, 'walkthrough.sh'), script)
  // Fed on standard input, as a paste is: what the blocks start must not read the rest of it.
  const child = Bun.spawn(['setsid', 'bash', '-s'], {
    cwd: dir,
    stdin: Bun.file(join(dir, 'walkthrough.sh')),
    env: {
      PATH: pathWithoutBun(),
      HOME: process.env.HOME ?? dir,
      PORT: String(freePort()),
      SIM_PORT: String(simPort),
      MULTIGRID_DATA_DIR: join(dir, 'data'),
      MULTIGRID_CONFIG: join(dir, 'catalog.json'),
      ...env,
    },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const timer = setTimeout(() => killGroup(child.pid), timeoutMs)
  const [code, stdout, stderr] = await Promise.all([
    child.exited,
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ])
  clearTimeout(timer)
  killGroup(child.pid)
  return { dir, code, stdout, stderr }
}

function killGroup(pid: number) {
  try {
    process.kill(-pid, 'SIGKILL')
  } catch {
    // Already gone: the walk-through's own trap stopped everything it started.
  }
}

/** The test's PATH without any directory that holds a `bun`, as a shell after `npm install` has it. */
function pathWithoutBun(): string {
  return (process.env.PATH ?? '/usr/bin:/bin')
    .split(delimiter)
    .filter((d) => d !== '' && !existsSync(join(d, 'bun')))
    .join(delimiter)
}
