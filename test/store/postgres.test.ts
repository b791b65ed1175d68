/**
 * PostgreSQL's migrations, when TEST_DATABASE_URL names one (skipped otherwise), in a schema of
 * this file's own, `t_<random>_m`, dropped at the end. The roles' contracts run on PostgreSQL from
 * their own files (test/store/<role>.test.ts, every-store.ts).
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { migrate, readMigrations } from '../../src/store/postgres/migrate.ts'
import { createPostgresStore } from '../../src/store/postgres/postgres-store.ts'

const url = process.env.TEST_DATABASE_URL

if (!url) {
  describe('store contract: postgres', () => {
    test.skip('needs TEST_DATABASE_URL, e.g. postgres://postgres@127.0.0.1:5432/test', () => {})
  })
} else {
  const schema = `t_${randomBytes(6).toString('hex')}`
  const admin = postgres(url, { max: 1, onnotice: () => {} })

  afterAll(async () => {
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
}
