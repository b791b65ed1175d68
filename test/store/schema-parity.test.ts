/**
 * Both dialects' migrations end with the same schema: the same numbered files, and, read from the
 * databases themselves, the same tables with the same columns of the same broad types
 * (schema-columns.ts). each role's rows file maps rows of both stores with one set of names, so a column added
 * to one dialect only would be a bug of the other. The PostgreSQL half needs TEST_DATABASE_URL.
 */
import { describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { readMigrations } from '../../src/store/postgres/migrate.ts'
import { createPostgresStore } from '../../src/store/postgres/postgres-store.ts'
import { readSqliteMigrations } from '../../src/store/sqlite/migrate.ts'
import { openSqliteDatabase } from '../../src/store/sqlite/open-database.ts'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { postgresColumns, sorted, sqliteColumns, type Columns } from './schema-columns.ts'

const url = process.env.TEST_DATABASE_URL

/** What only one dialect has, and why. */
const ONLY_POSTGRES = {
  // The embedded store keeps uploaded content on disk under <data dir>/files.
  file_chunks: 'table',
}
// Each runner's own bookkeeping: Unix seconds in SQLite, timestamptz in PostgreSQL.
const APPLIED_AT = { table: 'schema_migrations', column: 'applied_at' }

function comparable(columns: Columns): Columns {
  const copy = structuredClone(columns)
  for (const table of Object.keys(ONLY_POSTGRES)) delete copy[table]
  delete copy[APPLIED_AT.table]?.[APPLIED_AT.column]
  return sorted(copy)
}

async function sqliteSchema(): Promise<Columns> {
  const dir = mkdtempSync(join(tmpdir(), 'mg-parity-'))
  // The store migrates its data dir at open, as the gateway opens it.
  const { store } = createSqliteStore(dir)
  await store.close()
  const db = openSqliteDatabase(join(dir, 'multigrid.sqlite'))
  try {
    return sqliteColumns(db)
  } finally {
    db.close()
  }
}

describe('schema parity', () => {
  test("SQLite's migrations have PostgreSQL's numbers and names", () => {
    expect(readSqliteMigrations().map((m) => m.name)).toEqual(readMigrations().map((m) => m.name))
  })

  test.skipIf(!url)(
    'both dialects end with the same tables, columns and broad column types',
    async () => {
      const schema = `t_${randomBytes(6).toString('hex')}`
      const { store } = await createPostgresStore(url!, { schema, max: 1 })
      await store.close()
      const admin = postgres(url!, { max: 1, onnotice: () => {} })
      try {
        const onPostgres = await postgresColumns(admin, schema)
        const onSqlite = await sqliteSchema()
        for (const table of Object.keys(ONLY_POSTGRES)) {
          expect(onPostgres[table]).toBeDefined()
          expect(onSqlite[table]).toBeUndefined()
        }
        expect(onSqlite[APPLIED_AT.table]?.[APPLIED_AT.column]).toBe('integer')
        expect(comparable(onSqlite)).toEqual(comparable(onPostgres))
        // Guards the comparison itself: it saw the tables both stores have.
        expect(Object.keys(comparable(onSqlite))).toContain('batches')
        expect(comparable(onSqlite).batches?.purged_at).toBe('integer')
      } finally {
        await admin`DROP SCHEMA IF EXISTS ${admin(schema)} CASCADE`
        await admin.end()
      }
    },
  )
})
