/**
 * A gateway as its own process (src/main.ts), for tests that kill it: SIGKILL mid-batch, SIGTERM
 * drains. Restarting on the same env gives the same store and data dir.
 */
import { expect } from 'bun:test'
import Decimal from 'decimal.js'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { GATEWAY_BUN_ARGS } from '../../src/http/head-limit.ts'
import { writeCatalog } from './catalog.ts'
import { ADMIN_TOKEN, jsonl } from './gateway.ts'
import { FINAL_BATCH, waitFor } from './wait.ts'

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

/** A batch as the tests that kill the gateway read it. */
export interface BatchView {
  id: string
  status: string
  request_counts: Record<string, number>
  cost_usd: string
}

/**
 * The env of a gateway process for those tests: a port and a data dir of its own (`dirPrefix`),
 * `catalog`, the test admin token, polling every 50 ms and logging errors only; `extra` beside.
 */
export function processEnv(
  dirPrefix: string,
  catalog: unknown,
  extra: Record<string, string> = {},
): Record<string, string> {
  return {
    PORT: String(freePort()),
    HOST: '127.0.0.1',
    MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), dirPrefix)),
    MULTIGRID_CONFIG: writeCatalog(catalog),
    MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
    MULTIGRID_POLL_MS: '50',
    LOG_LEVEL: 'error',
    ...extra,
  }
}

/**
 * A gateway process on `env` that a test kills and restarts on the same store and port: its
 * url, admin API, accounts and batches always those of the process running now.
 */
export async function restartableGateway(env: Record<string, string>) {
  let current = await spawnGatewayProcess(env)
  const url = () => current.url
  const admin = (path: string, body?: unknown): Promise<Response> =>
    fetch(`${url()}/admin/v1${path}`, {
      method: body ? 'POST' : 'GET',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
    })
  return {
    get url() {
      return url()
    },
    kill: (signal: 'SIGKILL' | 'SIGTERM') => current.kill(signal),
    async restart() {
      current = await spawnGatewayProcess(env)
    },
    admin,
    /** An account with `credit` and a key of it: the account's id and the key's headers. */
    async account(name: string, credit: string) {
      const { id } = (await (await admin('/accounts', { name, credit_usd: credit })).json()) as {
        id: string
      }
      const { key } = (await (
        await admin(`/accounts/${id}/keys`, { rate_limit_per_minute: 1_000_000 })
      ).json()) as { key: string }
      return { accountId: id, headers: { authorization: `Bearer ${key}` } }
    },
    /** Submits a batch of `lines` (201 expected): its id. */
    async submit(lines: unknown[], headers: { authorization: string }) {
      const submitted = await fetch(`${url()}/v1/batches`, {
        method: 'POST',
        headers,
        body: jsonl(lines),
      })
      expect(submitted.status).toBe(201)
      return ((await submitted.json()) as BatchView).id
    },
    /**
     * Batch `id`'s results, after checking its account was charged exactly their sum out of
     * `credit` (decimal, to the last digit), the batch's cost is that sum, and nothing is held.
     */
    async chargedResults<Row extends { cost_usd?: string }>(
      batch: BatchView,
      account: { accountId: string; headers: { authorization: string }; credit: string },
    ): Promise<Row[]> {
      const text = await (
        await fetch(`${url()}/v1/batches/${batch.id}/results`, { headers: account.headers })
      ).text()
      const rows = text
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as Row)
      const sum = rows.reduce((total, row) => total.plus(row.cost_usd!), new Decimal(0))
      const view = (await (await admin(`/accounts/${account.accountId}`)).json()) as Record<
        string,
        string
      >
      expect(view.held_usd).toBe('0.000000')
      expect(new Decimal(account.credit).minus(view.balance_usd).equals(sum)).toBe(true)
      expect(new Decimal(batch.cost_usd).equals(sum)).toBe(true)
      return rows
    },
    /** Batch `id` once it is in a final state (within 60 s). */
    batchEnd: (id: string, headers: { authorization: string }) =>
      waitFor(
        'the batch to finish after the last restart',
        async () => {
          const view = (await (
            await fetch(`${url()}/v1/batches/${id}`, { headers })
          ).json()) as BatchView
          return FINAL_BATCH.includes(view.status) ? view : null
        },
        60_000,
        100,
      ),
  }
}
