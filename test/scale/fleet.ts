/**
 * A fleet for the scale tests: several gateway processes (src/main.ts) on one fresh PostgreSQL
 * schema and one Redis, with a key prefix of their own, in front of simulators this process runs.
 * The schema is dropped at the end unless a test failed (then it is kept, and its name printed).
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'bun:test'
import postgres from 'postgres'
import {
  startSimulator,
  type Simulator,
  type SimulatorOptions,
} from '../../src/simulator/server.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import {
  ADMIN_TOKEN,
  freshSchemaUrl,
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
} from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess, type GatewayProcess } from '../helpers/process-gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

/** The scale tests need both services; without them each file registers one skipped test. */
export const SCALE_READY = Boolean(TEST_DATABASE_URL && TEST_REDIS_URL)
export const NEEDS =
  'needs TEST_DATABASE_URL and TEST_REDIS_URL (PostgreSQL and Redis shared by the instances)'

export interface FleetOptions {
  instances: number
  /** OpenAI-compatible base URL of the simulator, e.g. `${sim.url}/v1`. */
  openai: string
  /** A providers file of the test's own instead of the test catalog on `openai`. */
  catalog?: unknown
  maxConcurrency?: number
  env?: Record<string, string>
  /** Per-instance overrides, by index. */
  envOf?: (index: number) => Record<string, string>
}

export type Batch = {
  id: string
  status: string
  request_counts: Record<string, number>
  cost_usd: string
}

export interface Fleet {
  urls: string[]
  processes: GatewayProcess[]
  env: Record<string, string>
  schema: string
  /** A connection to the fleet's schema, for looking at the rows themselves. */
  sql: postgres.Sql
  admin(path: string, body?: unknown, index?: number): Promise<Response>
  newAccount(
    credit: string,
    account?: Record<string, unknown>,
  ): Promise<{ accountId: string; key: string }>
  submit(index: number, key: string, body: string): Promise<Response>
  batch(index: number, key: string, id: string): Promise<Batch>
  waitDone(key: string, id: string, timeoutMs?: number): Promise<Batch>
  /** Marks the run failed: the schema is kept. */
  failed(): void
  stop(): Promise<void>
}

export async function startFleet(options: FleetOptions): Promise<Fleet> {
  const { url, schema } = freshSchemaUrl(TEST_DATABASE_URL!)
  const catalog =
    options.catalog ??
    testCatalog({ openai: options.openai }, { maxConcurrency: options.maxConcurrency ?? 64 })
  const env: Record<string, string> = {
    HOST: '127.0.0.1',
    DATABASE_URL: url,
    REDIS_URL: TEST_REDIS_URL!,
    MULTIGRID_REDIS_PREFIX: `mgt:${schema}:`,
    MULTIGRID_CONFIG: writeCatalog(catalog),
    MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
    MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
    LOG_LEVEL: 'error',
    ...options.env,
  }
  const spawnOne = (index: number) =>
    spawnGatewayProcess({
      ...env,
      PORT: String(freePort()),
      MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-fleet-')),
      ...options.envOf?.(index),
    })
  // Started together: the migrations' advisory lock is part of what is tested.
  const processes = await Promise.all(
    Array.from({ length: options.instances }, (_, i) => spawnOne(i)),
  )
  const sql = postgres(url.replace(/\?.*$/, ''), {
    max: 2,
    onnotice: () => {},
    connection: { search_path: schema },
  })
  let failed = false
  const urls = processes.map((p) => p.url)
  const admin = (path: string, body?: unknown, index = 0) =>
    fetch(`${urls[index]}/admin/v1${path}`, {
      method: body ? 'POST' : 'GET',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
    })
  const batch = async (index: number, key: string, id: string) =>
    (await (
      await fetch(`${urls[index]}/v1/batches/${id}`, {
        headers: { authorization: `Bearer ${key}` },
      })
    ).json()) as Batch
  return {
    urls,
    processes,
    env,
    schema,
    sql,
    admin,
    async newAccount(credit, account = {}) {
      const created = await admin('/accounts', {
        name: 'scale',
        credit_usd: credit,
        rate_limit_per_minute: 100_000,
        ...account,
      })
      if (created.status !== 201)
        throw new Error(`account: ${created.status} ${await created.text()}`)
      const { id } = (await created.json()) as { id: string }
      const made = await admin(`/accounts/${id}/keys`, {})
      if (made.status !== 201) throw new Error(`key: ${made.status} ${await made.text()}`)
      return { accountId: id, key: ((await made.json()) as { key: string }).key }
    },
    submit: (index, key, body) =>
      fetch(`${urls[index]}/v1/batches`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/jsonl' },
        body,
      }),
    batch,
    async waitDone(key, id, timeoutMs = 60_000) {
      let turn = 0
      // Asks the instances in turn, skipping one that is down: any of them can answer.
      return waitFor(
        `batch ${id} to finish`,
        async () => {
          const index = turn++ % urls.length
          try {
            const b = await batch(index, key, id)
            return FINAL_BATCH.includes(b.status) ? b : null
          } catch {
            return null
          }
        },
        timeoutMs,
        100,
      )
    },
    failed() {
      failed = true
    },
    async stop() {
      await Promise.all(processes.map((p) => p.kill('SIGTERM').catch(() => 0)))
      if (failed) console.error(`kept schema ${schema} for a look`)
      else await sql`DROP SCHEMA IF EXISTS ${sql(schema)} CASCADE`.catch(() => {})
      await sql.end({ timeout: 1 })
    },
  }
}

/** A describe block of scale tests: with both services its tests, else one skipped test. */
export function describeScale(name: string, tests: () => void) {
  describe(name, SCALE_READY ? tests : () => test.skip(NEEDS, () => {}))
}

/**
 * Runs `body` on a fleet in front of one simulator (its OpenAI-compatible upstream), then stops
 * both; a failure keeps the fleet's schema to look at.
 */
export async function withSimFleet(
  simulator: SimulatorOptions,
  options: Omit<FleetOptions, 'openai'>,
  body: (fleet: Fleet, sim: Simulator) => Promise<void>,
) {
  const sim = await startSimulator(simulator)
  const fleet = await startFleet({ ...options, openai: `${sim.url}/v1` })
  try {
    await body(fleet, sim)
  } catch (error) {
    fleet.failed()
    throw error
  } finally {
    await fleet.stop()
    await sim.stop()
  }
}

/**
 * `test` for the fleet a describe block shares (started in its beforeAll): a failing test keeps
 * the fleet's schema to look at.
 */
export function fleetTest(fleet: () => Fleet, defaultTimeoutMs: number) {
  return (name: string, body: () => Promise<void>, timeoutMs = defaultTimeoutMs) =>
    test(
      name,
      async () => {
        try {
          await body()
        } catch (error) {
          fleet().failed()
          throw error
        }
      },
      timeoutMs,
    )
}
