/** Shared helpers for the benches: the standard file, a gateway child process, memory readings. */
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const ROOT = join(import.meta.dir, '..')

/** The standard benchmark file: 50,000 lines, exactly 16 MiB (see bench/gen-jsonl.ts). */
export async function standardFile(model: string): Promise<string> {
  const path = join(ROOT, 'bench/out', `big-${model.replace(/\W/g, '_')}.jsonl`)
  if (!existsSync(path)) {
    const child = Bun.spawn([process.execPath, join(ROOT, 'bench/gen-jsonl.ts'), '--bytes', '16777216', '--model', model, '--out', path], { stdout: 'ignore' })
    if ((await child.exited) !== 0) throw new Error('gen-jsonl failed')
  }
  return path
}

/** Peak and current resident memory of a process, in bytes, from /proc. */
export async function memoryOf(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await Bun.file(`/proc/${pid}/status`).text()
  const kb = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) * 1024
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

/** Starts `src/main.ts` as its own process, so its memory and CPU are its own. */
export async function spawnGateway(env: Record<string, string>, port: number): Promise<GatewayProcess> {
  const fullEnv = {
    PATH: process.env.PATH ?? '',
    PORT: String(port),
    HOST: '127.0.0.1',
    MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-bench-')),
    MULTIGRID_ADMIN_TOKEN: 'bench-admin-token-0123456789',
    LOG_LEVEL: 'warn',
    ...env,
  }
  const child = Bun.spawn([process.execPath, join(ROOT, 'src/main.ts')], { env: fullEnv, stdout: 'inherit', stderr: 'inherit' })
  const url = `http://127.0.0.1:${port}`
  for (let i = 0; i < 100; i++) {
    try {
      if ((await fetch(`${url}/healthz`)).ok) break
    } catch {}
    await Bun.sleep(50)
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
  const admin = { authorization: 'Bearer bench-admin-token-0123456789', 'content-type': 'application/json' }
  const account = (await (await fetch(`${url}/admin/v1/accounts`, { method: 'POST', headers: admin, body: JSON.stringify({ name: 'bench', credit_usd: credit, max_open_batches: 1000, rate_limit_per_minute: 1_000_000 }) })).json()) as { id: string }
  const key = (await (await fetch(`${url}/admin/v1/accounts/${account.id}/keys`, { method: 'POST', headers: admin, body: '{}' })).json()) as { key: string }
  return key.key
}

export const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
export const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`
