/**
 * How the gateway process is tuned: the allocator's setting for a server, given by what starts the
 * process (`npm start` and the other server scripts in package.json, the Dockerfile's ENV; docs/configuration.md,
 * "MIMALLOC_PURGE_DELAY"), and the SQLite threads' lower priority (src/threads/background-priority.ts).
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import {
  ADMIN_TOKEN,
  dropTestSchema,
  freshSchemaUrl,
  STORES,
  TEST_DATABASE_URL,
} from '../helpers/gateway.ts'
import { BACKGROUND_NICE_STEP } from '../../src/threads/background-priority.ts'
import { freePort, spawnGatewayProcess } from '../helpers/process-gateway.ts'
import { waitFor } from '../helpers/wait.ts'

const ROOT = join(import.meta.dir, '../..')

/** The environment the process with this pid runs with, from the kernel. */
function environOf(pid: number): Record<string, string> {
  const entries = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean)
  return Object.fromEntries(
    entries.map((entry) => [
      entry.slice(0, entry.indexOf('=')),
      entry.slice(entry.indexOf('=') + 1),
    ]),
  )
}

/** Each thread's name, nice value and scheduling policy (0 SCHED_OTHER, 3 SCHED_BATCH), from /proc/<pid>/task/<tid>/stat. */
function threadsOf(pid: number): { tid: number; name: string; nice: number; policy: number }[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8')
    // Fields after the parenthesised name start at field 3 (state); nice is field 19, policy 41.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
    return { tid: Number(tid), name, nice: Number(fields[19 - 3]), policy: Number(fields[41 - 3]) }
  })
}

/** The processes under `root` (children, their children, …), from each process's parent in /proc. */
function descendantsOf(root: number): number[] {
  const children = new Map<number, number[]>()
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8')
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)])
    } catch {} // ended between the listing and the read
  }
  const found: number[] = []
  for (let next = [root]; next.length > 0;) {
    next = next.flatMap((pid) => children.get(pid) ?? [])
    found.push(...next)
  }
  return found
}

/**
 * The gateway's named threads (src/threads/thread-name.ts) by name, once each name in `expected`
 * has that many and all but mg-validate run as `lowered`: a thread sets its policy, then its
 * nice, once it has loaded. A thread the
 * runtime starts from one of them carries its name until it names itself, so a count is only
 * taken as settled when it is the expected one. Past 10 s, the threads as they are then.
 */
async function settledThreads(
  pid: number,
  expected: Record<string, number>,
  lowered: { policy: number; nice: number },
) {
  const snapshot = () => {
    const byName: Record<string, ReturnType<typeof threadsOf>> = {}
    for (const name of Object.keys(expected)) byName[name] = []
    for (const thread of threadsOf(pid))
      if (thread.name in expected) byName[thread.name].push(thread)
    return byName
  }
  const settled = (byName: ReturnType<typeof snapshot>) =>
    Object.entries(expected).every(
      ([name, count]) =>
        byName[name].length === count &&
        (name === 'mg-validate' ||
          byName[name].every((t) => t.policy === lowered.policy && t.nice === lowered.nice)),
    )
  return waitFor(
    'the named threads to start and set their priority',
    async () => {
      const byName = snapshot()
      return settled(byName) ? byName : null
    },
    10_000,
  ).catch(() => snapshot())
}

const countsOf = (byName: Record<string, unknown[]>) =>
  Object.fromEntries(Object.entries(byName).map(([name, threads]) => [name, threads.length]))

/**
 * `npm start`, as the README says to run the gateway (npm runs the script with sh: dash here).
 * Resolves once it answers, with the pid of the Bun process serving (under npm and its shell).
 */
async function npmStart(env: Record<string, string>) {
  const npm = Bun.spawn(['npm', 'start', '--silent'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir(), ...env },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  const stop = async () => {
    npm.kill('SIGTERM')
    await Promise.race([npm.exited, Bun.sleep(15_000)])
  }
  try {
    await waitFor(
      'npm start to answer',
      async () => (await fetch(`http://127.0.0.1:${env.PORT}/healthz`).catch(() => null))?.ok,
      30_000,
    )
    const pid = descendantsOf(npm.pid).find((candidate) => {
      const argv = readFileSync(`/proc/${candidate}/cmdline`, 'utf8').split('\0')
      return /(^|\/)bun(\.exe)?$/.test(argv[0]) && argv.includes('src/main.ts')
    })
    if (pid === undefined) throw new Error('no Bun process running src/main.ts under npm start')
    return {
      pid,
      /** SIGTERM to the gateway itself: it drains and exits, and npm with it. */
      async stop() {
        process.kill(pid, 'SIGTERM')
        const code = await Promise.race([npm.exited, Bun.sleep(15_000).then(() => null)])
        if (code === null) await stop()
        return code
      },
    }
  } catch (error) {
    await stop()
    throw error
  }
}

function gatewayEnv(extra: Record<string, string> = {}) {
  return {
    PORT: String(freePort()),
    HOST: '127.0.0.1',
    MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-alloc-')),
    MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
    MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
    LOG_LEVEL: 'error',
    ...extra,
  }
}

describe('process tuning', () => {
  test('`npm start` runs the gateway with MIMALLOC_PURGE_DELAY=-1', async () => {
    const env = gatewayEnv()
    expect(env).not.toHaveProperty('MIMALLOC_PURGE_DELAY')
    const gateway = await npmStart(env)
    try {
      expect(environOf(gateway.pid).MIMALLOC_PURGE_DELAY).toBe('-1')
      expect(environOf(gateway.pid).MULTIGRID_DATA_DIR).toBe(env.MULTIGRID_DATA_DIR)
    } finally {
      expect(await gateway.stop()).toBe(0)
    }
  })

  test("`npm start` keeps an operator's own MIMALLOC_PURGE_DELAY", async () => {
    const gateway = await npmStart(gatewayEnv({ MIMALLOC_PURGE_DELAY: '10' }))
    try {
      expect(environOf(gateway.pid).MIMALLOC_PURGE_DELAY).toBe('10')
    } finally {
      expect(await gateway.stop()).toBe(0)
    }
  })

  test('the gateway does not restart itself to change its environment: started bare, it runs as it was started', async () => {
    const env = gatewayEnv()
    const child = Bun.spawn([process.execPath, join(ROOT, 'src/main.ts')], {
      env: { PATH: process.env.PATH ?? '', ...env },
      stdout: 'ignore',
      stderr: 'inherit',
    })
    try {
      await waitFor(
        'the gateway to answer',
        async () => (await fetch(`http://127.0.0.1:${env.PORT}/healthz`).catch(() => null))?.ok,
        15_000,
      )
      expect(environOf(child.pid)).not.toHaveProperty('MIMALLOC_PURGE_DELAY')
    } finally {
      child.kill('SIGTERM')
      expect(await child.exited).toBe(0)
    }
  })

  test('the other ways a server is started carry the setting too: the image, the simulator and the benches', async () => {
    const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')
    // The image starts Bun itself (no npm, no shell): its ENV is what gives the setting.
    expect(dockerfile).toMatch(/^ENV .*\bMIMALLOC_PURGE_DELAY=-1\b/m)
    expect(dockerfile).toMatch(/^CMD \["bun", ("[^"]+", )*"src\/main\.ts"\]$/m)
    const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>
    }
    const servers = Object.keys(scripts).filter(
      (name) => name === 'start' || name === 'sim' || name.startsWith('bench:'),
    )
    expect(servers.length).toBeGreaterThanOrEqual(6)
    for (const name of servers)
      expect(`${name}: ${scripts[name]}`).toStartWith(
        `${name}: MIMALLOC_PURGE_DELAY=\${MIMALLOC_PURGE_DELAY:--1} bun `,
      )
  })

  test('the SQLite threads (dispatch, admission, checkpoints) and the schema threads run under SCHED_BATCH, 10 nicer than the process; the event loop and the validation threads are left as they were', async () => {
    const gateway = await spawnGatewayProcess(gatewayEnv())
    try {
      const main = threadsOf(gateway.pid).find((t) => t.tid === gateway.pid)!
      expect(main.policy).toBe(0)
      // The gateway inherits this test's nice; its event loop keeps it.
      const ours = threadsOf(process.pid).find((t) => t.tid === process.pid)!.nice
      expect(main.nice).toBe(ours)
      const background = { policy: 3, nice: Math.min(19, ours + BACKGROUND_NICE_STEP) }
      // Three schema threads: two and a spare (src/schemas/schema-threads.ts).
      const expected = {
        'mg-dispatch': 1,
        'mg-admission': 1,
        'mg-checkpoint': 1,
        'mg-schema': 3,
        'mg-validate': 2,
      }
      const threads = await settledThreads(gateway.pid, expected, background)
      expect(countsOf(threads)).toEqual(expected)
      for (const name of ['mg-dispatch', 'mg-admission', 'mg-checkpoint', 'mg-schema'])
        expect(threads[name].map(({ policy, nice }) => ({ name, policy, nice }))).toEqual(
          threads[name].map(() => ({ name, ...background })),
        )
      // A request waits for the validation threads' work, so they keep the process's priority.
      expect(threads['mg-validate'].map(({ policy, nice }) => ({ policy, nice }))).toEqual([
        { policy: 0, nice: ours },
        { policy: 0, nice: ours },
      ])
      // Which runtime threads (JIT, pools, collectors) are lowered too depends on which thread
      // first needed them: a thread starts with its creator's policy. So no count of them is
      // asserted; the event loop above and the validation threads are what must keep theirs.
    } finally {
      expect(await gateway.kill('SIGTERM')).toBe(0)
    }
  })

  // The PostgreSQL store runs the dispatcher's calls on a thread too, with a pool of its own.
  for (const store of STORES.filter((kind) => kind === 'postgres')) {
    test(`on ${store}: the dispatch thread runs under SCHED_BATCH, 10 nicer; the validation threads are left as they were`, async () => {
      const { url } = freshSchemaUrl(TEST_DATABASE_URL!)
      const gateway = await spawnGatewayProcess(gatewayEnv({ DATABASE_URL: url }))
      try {
        expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
        const ours = threadsOf(process.pid).find((t) => t.tid === process.pid)!.nice
        // The dispatch thread lowers its priority once it has loaded the driver, which may be
        // after the gateway first answers; the schema threads once they have loaded Ajv.
        const background = { policy: 3, nice: Math.min(19, ours + BACKGROUND_NICE_STEP) }
        const expected = { 'mg-dispatch': 1, 'mg-schema': 3, 'mg-validate': 2 }
        const threads = await settledThreads(gateway.pid, expected, background)
        expect(countsOf(threads)).toEqual(expected)
        for (const name of ['mg-dispatch', 'mg-schema'])
          expect(threads[name].map(({ policy, nice }) => ({ name, policy, nice }))).toEqual(
            threads[name].map(() => ({ name, ...background })),
          )
        expect(threads['mg-validate'].map(({ policy, nice }) => ({ policy, nice }))).toEqual([
          { policy: 0, nice: ours },
          { policy: 0, nice: ours },
        ])
      } finally {
        expect(await gateway.kill('SIGTERM')).toBe(0)
        await dropTestSchema(url)
      }
    })
  }
})
