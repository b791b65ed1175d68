/**
 * The chunk-intent contract (chunk-contract.ts) on the embedded store, in memory and on a file,
 * and on PostgreSQL when TEST_DATABASE_URL names one (in a schema of its own, dropped at the end).
 */
import { afterAll, describe, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import postgres from 'postgres'
import { createPostgresStore } from '../../src/store/postgres/postgres-store.ts'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { runChunkStoreContract } from './chunk-contract.ts'

runChunkStoreContract('sqlite', async () => createSqliteStore(null))
runChunkStoreContract('sqlite file', async () =>
  createSqliteStore(mkdtempSync(join(tmpdir(), 'mg-chunks-'))),
)

const url = process.env.TEST_DATABASE_URL
if (!url) {
  describe('chunk store contract: postgres', () => {
    test.skip('needs TEST_DATABASE_URL, e.g. postgres://postgres@127.0.0.1:5432/test', () => {})
  })
} else {
  const admin = postgres(url, { max: 1, onnotice: () => {} })
  const schemas: string[] = []
  afterAll(async () => {
    for (const schema of schemas) await admin`DROP SCHEMA ${admin(schema)} CASCADE`
    await admin.end()
  })
  runChunkStoreContract('postgres', async () => {
    const schema = `t_${randomBytes(6).toString('hex')}`
    schemas.push(schema)
    return createPostgresStore(url, { schema, max: 4 })
  })
}
