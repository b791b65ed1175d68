/**
 * Starts a real gateway in this process on a random port, on a fresh store: SQLite in a temp
 * dir, or a fresh PostgreSQL schema when `store: 'postgres'` (needs TEST_DATABASE_URL).
 */
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config.ts'
import { startGateway, type Gateway } from '../../src/gateway.ts'
import { createLogger } from '../../src/telemetry/logger.ts'
import { testCatalog, writeCatalog, type TestUpstreams } from './catalog.ts'

export const ADMIN_TOKEN = 'test-admin-token-0123456789'
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? null
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? null

/** The stores to run an end-to-end suite on: SQLite always, PostgreSQL when configured. */
export const STORES: ('sqlite' | 'postgres')[] = TEST_DATABASE_URL
  ? ['sqlite', 'postgres']
  : ['sqlite']

export interface TestGatewayOptions {
  store?: 'sqlite' | 'postgres'
  upstreams?: TestUpstreams
  catalog?: unknown
  env?: Record<string, string>
  /** Collects log lines, for tests that read them. */
  logLines?: string[]
  /** What admission and the live ledger take for now (Unix ms): to cross 00:00 UTC in a test. */
  clock?: () => number
  /** A second instance on another's PostgreSQL schema: stopping it leaves the schema to the first. */
  sharesSchema?: boolean
}

export interface TestGateway extends Gateway {
  env: Record<string, string>
  admin(path: string, init?: { method?: string; body?: unknown }): Promise<Response>
  /** A new account with `credit` USD and a key with all scopes (or the given ones). */
  newAccount(
    credit?: string,
    key?: { scopes?: string[]; rate_limit_per_minute?: number },
    account?: Record<string, unknown>,
  ): Promise<{ accountId: string; key: string; keyId: string }>
  request(path: string, key: string | null, init?: RequestInit): Promise<Response>
}

export function freshSchemaUrl(base: string) {
  const schema = `t_${Math.random().toString(36).slice(2, 10)}`
  const url = new URL(base)
  url.searchParams.set('search_path', schema)
  return { url: url.toString(), schema }
}

/** Drops the schema a `freshSchemaUrl` URL points at, so test runs leave the shared database as they found it. */
export async function dropTestSchema(databaseUrl: string) {
  const schema = new URL(databaseUrl).searchParams.get('search_path')
  if (!schema?.startsWith('t_')) return
  const { default: postgres } = await import('postgres')
  const sql = postgres(databaseUrl, { max: 1, onnotice: () => {} })
  try {
    await sql`DROP SCHEMA IF EXISTS ${sql(schema)} CASCADE`
  } finally {
    await sql.end()
  }
}

export async function startTestGateway(options: TestGatewayOptions = {}): Promise<TestGateway> {
  const catalog =
    options.catalog ?? testCatalog(options.upstreams ?? { openai: 'http://127.0.0.1:9/v1' })
  const env: Record<string, string> = {
    PORT: '0',
    HOST: '127.0.0.1',
    MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-data-')),
    MULTIGRID_CONFIG: writeCatalog(catalog),
    MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
    MG_TEST_ANTHROPIC_KEY: 'sk-ant-test-secret',
    LOG_LEVEL: 'warn',
    ...options.env,
  }
  if (options.store === 'postgres') {
    if (!TEST_DATABASE_URL) throw new Error('TEST_DATABASE_URL is not set')
    env.DATABASE_URL = freshSchemaUrl(TEST_DATABASE_URL).url
  }
  const config = loadConfig(env)
  const logger = options.logLines
    ? createLogger(config.logLevel, (line) => options.logLines!.push(line))
    : undefined
  const gateway = await startGateway(config, { logger, clock: options.clock })
  const admin = (path: string, init: { method?: string; body?: unknown } = {}) =>
    fetch(`${gateway.url}/admin/v1${path}`, {
      method: init.method ?? (init.body ? 'POST' : 'GET'),
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: init.body ? JSON.stringify(init.body) : undefined,
    })
  return {
    ...gateway,
    async stop() {
      await gateway.stop()
      if (env.DATABASE_URL && !options.sharesSchema) await dropTestSchema(env.DATABASE_URL)
    },
    env,
    admin,
    async newAccount(credit = '100', key = {}, account = {}) {
      const created = await admin('/accounts', {
        body: { name: 'test', credit_usd: credit, ...account },
      })
      if (created.status !== 201)
        throw new Error(`account: ${created.status} ${await created.text()}`)
      const { id } = (await created.json()) as { id: string }
      const made = await admin(`/accounts/${id}/keys`, { body: key })
      if (made.status !== 201) throw new Error(`key: ${made.status} ${await made.text()}`)
      const body = (await made.json()) as { id: string; key: string }
      return { accountId: id, key: body.key, keyId: body.id }
    },
    request(path, key, init = {}) {
      const headers = new Headers(init.headers)
      if (key) headers.set('authorization', `Bearer ${key}`)
      return fetch(`${gateway.url}${path}`, { ...init, headers })
    },
  }
}

/** A JSONL file from objects. */
export const jsonl = (lines: unknown[]) =>
  lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n'

export function chatLine(
  id: string,
  content = 'hello',
  extra: Record<string, unknown> = {},
  model = 'sim/chat',
) {
  return {
    custom_id: id,
    method: 'POST',
    url: '/v1/chat/completions',
    body: { model, messages: [{ role: 'user', content }], max_tokens: 32, ...extra },
  }
}

export function embedLine(id: string, input: string | string[] = 'hello', model = 'sim/embed') {
  return { custom_id: id, method: 'POST', url: '/v1/embeddings', body: { model, input } }
}
