/**
 * Moves a batch's create `buckets` ten-minute buckets into the past as an SDK retry sees it: the
 * bucket in its stored body key (src/admission/repeated-create.ts), edited as data in the
 * gateway's own store (SQLite file or PostgreSQL schema), the way a create that old looks.
 */
import type { TestGateway } from './gateway.ts'
import { openStoreFile } from './store-file.ts'

const aged = (key: string, buckets: number) =>
  key.replace(/:(\d+)$/, (_, bucket: string) => `:${Number(bucket) - buckets}`)

export async function ageCreate(gw: TestGateway, batchId: string, buckets: number) {
  if (gw.env.DATABASE_URL) {
    const { default: postgres } = await import('postgres')
    const sql = postgres(gw.env.DATABASE_URL, { max: 1, onnotice: () => {} })
    try {
      const [row] = await sql`SELECT idempotency_key FROM batches WHERE id = ${batchId}`
      const key = aged(String(row!.idempotency_key), buckets)
      await sql`UPDATE batches SET idempotency_key = ${key} WHERE id = ${batchId}`
    } finally {
      await sql.end()
    }
    return
  }
  const db = openStoreFile(gw.env.MULTIGRID_DATA_DIR)
  try {
    const row = db.query('SELECT idempotency_key FROM batches WHERE id = ?').get(batchId) as {
      idempotency_key: string
    }
    const key = aged(row.idempotency_key, buckets)
    db.query('UPDATE batches SET idempotency_key = ? WHERE id = ?').run(key, batchId)
  } finally {
    db.close()
  }
}
