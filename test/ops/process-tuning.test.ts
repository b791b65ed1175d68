/**
 * How the gateway process tunes itself: the allocator's setting for a server
 * (src/memory/server-memory-settings.ts; not imported here: importing it applies it), and the
 * SQLite threads' lower priority (src/threads/background-priority.ts).
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import { ADMIN_TOKEN, dropTestSchema, freshSchemaUrl, STORES, TEST_DATABASE_URL } from '../helpers/gateway.ts'
import { BACKGROUND_NICE_STEP } from '../../src/threads/background-priority.ts'
import { freePort, spawnGatewayProcess } from '../helpers/process-gateway.ts'
import { waitFor } from '../helpers/wait.ts'

/** The environment the process with this pid runs with, from the kernel. */
function environOf(pid: number): Record<string, string> {
  const entries = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean)
  return Object.fromEntries(entries.map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]))
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
  test('the gateway restarts itself in place with MIMALLOC_PURGE_DELAY=-1: same pid, same process answering', async () => {
    const env = gatewayEnv()
    expect(env).not.toHaveProperty('MIMALLOC_PURGE_DELAY')
    const gateway = await spawnGatewayProcess(env)
    try {
      // The pid that was spawned is the one serving, and it carries the setting.
      expect(environOf(gateway.pid).MIMALLOC_PURGE_DELAY).toBe('-1')
      expect(environOf(gateway.pid).MULTIGRID_DATA_DIR).toBe(env.MULTIGRID_DATA_DIR)
      expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
    } finally {
      // SIGTERM reaches the gateway itself: it drains and exits cleanly.
      expect(await gateway.kill('SIGTERM')).toBe(0)
    }
  })

  test("an operator's own MIMALLOC_PURGE_DELAY is kept", async () => {
    const gateway = await spawnGatewayProcess(gatewayEnv({ MIMALLOC_PURGE_DELAY: '10' }))
    try {
      expect(environOf(gateway.pid).MIMALLOC_PURGE_DELAY).toBe('10')
    } finally {
      expect(await gateway.kill('SIGTERM')).toBe(0)
    }
  })

  test('the SQLite threads (dispatch, checkpoints) run under SCHED_BATCH, 10 nicer than the process; the event loop and the validation thread are left as they were', async () => {
    const gateway = await spawnGatewayProcess(gatewayEnv())
    try {
      const threads = threadsOf(gateway.pid)
      const main = threads.find((t) => t.tid === gateway.pid)!
      expect(main.policy).toBe(0)
      // The gateway inherits this test's nice; its event loop keeps it.
      const ours = threadsOf(process.pid).find((t) => t.tid === process.pid)!.nice
      expect(main.nice).toBe(ours)
      // Three Worker threads: the two SQLite ones, and the validation thread (a request waits
      // for its work, so it keeps the process's priority).
      const workers = await waitFor('the SQLite threads to lower their priority', async () => {
        const found = threadsOf(gateway.pid).filter((t) => t.name === 'Worker')
        return found.filter((t) => t.policy === 3).length >= 2 ? found : null
      }, 10_000)
      expect(workers.map((t) => t.policy).sort()).toEqual([0, 3, 3])
      const background = Math.min(19, ours + BACKGROUND_NICE_STEP)
      expect(workers.filter((t) => t.policy === 3).map((t) => t.nice)).toEqual([background, background])
      expect(workers.filter((t) => t.policy === 0).map((t) => t.nice)).toEqual([ours])
      // Threads the dispatch thread starts afterwards (its heap's collector) inherit the policy.
      expect(threads.filter((t) => t.policy === 3).length).toBeLessThan(threads.length / 2)
    } finally {
      expect(await gateway.kill('SIGTERM')).toBe(0)
    }
  })

  // The PostgreSQL store runs the dispatcher's calls on a thread too, with a pool of its own.
  for (const store of STORES.filter((kind) => kind === 'postgres')) {
    test(`on ${store}: the dispatch thread runs under SCHED_BATCH, 10 nicer; the validation thread is left as it was`, async () => {
      const { url } = freshSchemaUrl(TEST_DATABASE_URL!)
      const gateway = await spawnGatewayProcess(gatewayEnv({ DATABASE_URL: url }))
      try {
        expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200)
        const ours = threadsOf(process.pid).find((t) => t.tid === process.pid)!.nice
        // The thread lowers its priority once it has loaded the driver, which may be after the
        // gateway first answers.
        const workers = await waitFor('the dispatch thread to lower its priority', async () => {
          const found = threadsOf(gateway.pid).filter((t) => t.name === 'Worker')
          return found.some((t) => t.policy === 3) ? found : null
        }, 10_000)
        expect(workers.map((t) => t.policy).sort()).toEqual([0, 3])
        expect(workers.find((t) => t.policy === 3)!.nice).toBe(Math.min(19, ours + BACKGROUND_NICE_STEP))
        expect(workers.find((t) => t.policy === 0)!.nice).toBe(ours)
      } finally {
        expect(await gateway.kill('SIGTERM')).toBe(0)
        await dropTestSchema(url)
      }
    })
  }
})
