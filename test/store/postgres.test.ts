/**
 * The store contract on PostgreSQL, when TEST_DATABASE_URL names one (skipped otherwise). This
 * file works in a schema of its own, `t_<random>`, emptied before each test and dropped at the
 * end unless a test failed (then it is kept for a look, and its name printed).
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { migrate, readMigrations } from '../../src/store/postgres/migrate.ts'
import { createPostgresStore } from '../../src/store/postgres/postgres-store.ts'
import { contractFailed, runStoreContract } from './contract.ts'
import { runProgressContract } from './progress-contract.ts'

const url = process.env.TEST_DATABASE_URL

if (!url) {
  describe('store contract: postgres', () => {
    test.skip('needs TEST_DATABASE_URL, e.g. postgres://postgres@127.0.0.1:5432/test', () => {})
  })
} else {
  const schema = `t_${randomBytes(6).toString('hex')}`
  const admin = postgres(url, { max: 1, onnotice: () => {} })

  beforeAll(async () => {
    // Migrates the fresh schema once; each test then starts from empty tables.
    const { store } = await createPostgresStore(url, { schema, max: 1 })
    await store.close()
  })

  afterAll(async () => {
    if (contractFailed('postgres')) console.error(`kept schema ${schema} for a look`)
    else await admin`DROP SCHEMA ${admin(schema)} CASCADE`
    await admin.end()
  })

  describe('migrations', () => {
    test('instances starting together apply each file once, in order', async () => {
      const fresh = `${schema}_m`
      const stores = await Promise.all(
        [1, 2, 3].map(() => createPostgresStore(url, { schema: fresh, max: 1 })),
      )
      await Promise.all(stores.map(({ store }) => store.close()))
      const rows =
        await admin`SELECT version, name FROM ${admin(fresh)}.schema_migrations ORDER BY version`
      expect(rows.map((row) => row.name)).toEqual(readMigrations().map((m) => m.name))
      expect(rows.map((row) => row.version)).toEqual(readMigrations().map((m) => m.version))
      // Nothing is left to apply the next time.
      const sql = postgres(url, { max: 1, onnotice: () => {}, connection: { search_path: fresh } })
      expect(await migrate(sql, { schema: fresh })).toEqual([])
      await sql.end()
      await admin`DROP SCHEMA ${admin(fresh)} CASCADE`
    })
  })

  const emptyStore = async () => {
    // Every table but the migrations' record, so tables added by later migrations are emptied too.
    const tables = await admin`
      SELECT tablename FROM pg_tables
      WHERE schemaname = ${schema} AND tablename <> 'schema_migrations'`
    await admin`TRUNCATE ${admin(tables.map((row) => `${schema}.${row.tablename}`))}`
    return createPostgresStore(url, { schema, max: 4 })
  }
  runStoreContract('postgres', emptyStore)
  runProgressContract('postgres', emptyStore)
}
