/**
 * A gateway as its own process (src/main.ts), for tests that kill it: SIGKILL mid-batch, SIGTERM
 * drains. Restarting on the same env gives the same store and data dir.
 */
import { join } from 'node:path'
import { GATEWAY_BUN_ARGS } from '../../src/http/head-limit.ts'

const ROOT = join(import.meta.dir, '../..')

export interface GatewayProcess {
  url: string
  /** The process id, e.g. to read its memory from /proc/<pid>/status. */
  pid: number
  exited: Promise<number>
  kill(signal: 'SIGKILL' | 'SIGTERM'): Promise<number>
}

/** Started as `npm start` starts it: with the allocator's setting for a server unless `env` has its own. */
export async function spawnGatewayProcess(env: Record<string, string>): Promise<GatewayProcess> {
  const child = Bun.spawn([process.execPath, ...GATEWAY_BUN_ARGS, join(ROOT, 'src/main.ts')], {
    env: { PATH: process.env.PATH ?? '', MIMALLOC_PURGE_DELAY: '-1', ...env },
    stdout: 'ignore',
    stderr: 'inherit',
  })
  const url = `http://127.0.0.1:${env.PORT}`
  const deadline = Date.now() + 15_000
  for (;;) {
    try {
      if ((await fetch(`${url}/healthz`)).ok) break
    } catch {}
    if (Date.now() > deadline) throw new Error('gateway process did not start')
    await Bun.sleep(50)
  }
  return {
    url,
    pid: child.pid,
    exited: child.exited,
    async kill(signal) {
      child.kill(signal)
      return child.exited
    },
  }
}

/** A free port on 127.0.0.1. */
export function freePort(): number {
  const server = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response() })
  const port = server.port!
  server.stop(true)
  return port
}
