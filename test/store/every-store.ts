/**
 * Runs one role's contract suite (test/store/<role>.test.ts) on every store, hono's
 * `runTest({ newRouter })` pattern: the embedded store in memory and on a file (there the
 * dispatcher's statements run on a thread of their own), and PostgreSQL when TEST_DATABASE_URL
 * names one. PostgreSQL works in a schema of the test file's own, `t_<random>`, emptied before
 * each test and dropped at the end unless a test failed (then it is kept for a look, and its name
 * printed).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { createPostgresStore } from '../../src/store/postgres/postgres-store.ts'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import type { NewAccount, OpenedStore } from '../../src/store/store.ts'

export const T0 = 1_764_460_000 // seconds
export const MS = T0 * 1000
export const DAY = 86_400

/** One store to run a contract on: its name, a fresh store per call, and a test that counts. */
export interface StoreSuite {
  name: string
  makeStore: () => Promise<OpenedStore>
  /** bun:test's `test`, noting a failure first so PostgreSQL's schema is kept for a look. */
  it: (title: string, fn: () => Promise<void>, timeout?: number) => void
}

/** Where a contract runs: `file: false` leaves out the embedded store on a file. */
export function onEveryStore(
  contract: (suite: StoreSuite) => void,
  where: { file?: boolean } = {},
) {
  const plain = (name: string, makeStore: () => Promise<OpenedStore>): StoreSuite => ({
    name,
    makeStore,
    it: (title, fn, timeout) => test(title, fn, timeout),
  })
  contract(plain('sqlite', async () => createSqliteStore(null)))
  if (where.file !== false) {
    contract(
      plain('sqlite file', async () =>
        createSqliteStore(mkdtempSync(join(tmpdir(), 'mg-contract-'))),
      ),
    )
  }
  const url = process.env.TEST_DATABASE_URL
  if (!url) {
    describe('store contract: postgres', () => {
      test.skip('needs TEST_DATABASE_URL, e.g. postgres://postgres@127.0.0.1:5432/test', () => {})
    })
    return
  }
  const schema = `t_${randomBytes(6).toString('hex')}`
  const admin = postgres(url, { max: 1, onnotice: () => {} })
  let failed = false
  beforeAll(async () => {
    // Migrates the fresh schema once; each test then starts from empty tables.
    const { store } = await createPostgresStore(url, { schema, max: 1 })
    await store.close()
  })
  afterAll(async () => {
    if (failed) console.error(`kept schema ${schema} for a look`)
    else await admin`DROP SCHEMA ${admin(schema)} CASCADE`
    await admin.end()
  })
  const emptyStore = async () => {
    // Every table but the migrations' record, so tables added by later migrations are emptied too.
    const tables = await admin`
      SELECT tablename FROM pg_tables
      WHERE schemaname = ${schema} AND tablename <> 'schema_migrations'`
    await admin`TRUNCATE ${admin(tables.map((row) => `${schema}.${row.tablename}`))}`
    return createPostgresStore(url, { schema, max: 4 })
  }
  contract({
    name: 'postgres',
    makeStore: emptyStore,
    it: (title, fn, timeout) =>
      test(
        title,
        async () => {
          try {
            await fn()
          } catch (error) {
            failed = true
            throw error
          }
        },
        timeout,
      ),
  })
}

/**
 * A fresh store for each test of the describe this is called in: `take` gets it before the test,
 * and it is closed after.
 */
export function freshStoreEachTest(
  makeStore: StoreSuite['makeStore'],
  take: (opened: OpenedStore) => void,
) {
  let opened: OpenedStore | null = null
  beforeEach(async () => {
    opened = await makeStore()
    take(opened)
  })
  afterEach(async () => {
    await opened?.store.close()
  })
}

/** An account with `creditUsd`, ten open batches allowed, created at T0. */
export const newAccount = (
  id: string,
  creditUsd = '100',
  extra: Partial<NewAccount> = {},
): NewAccount => ({
  id,
  name: id,
  creditUsd,
  maxOpenBatches: 10,
  rateLimitPerMinute: 600,
  createdAt: T0,
  ...extra,
})
