/**
 * Edits a batch's row in the gateway's own store (SQLite file or PostgreSQL schema), as data, the
 * way a batch stored by an older release or in another state looks. `assignment` is the test's
 * own SQL, written the same in both dialects (`request_hash = NULL`).
 */
import type { TestGateway } from './gateway.ts'
import { openStoreFile } from './store-file.ts'

export async function editBatchRow(gw: TestGateway, batchId: string, assignment: string) {
  if (gw.env.DATABASE_URL) {
    const { default: postgres } = await import('postgres')
    const sql = postgres(gw.env.DATABASE_URL, { max: 1, onnotice: () => {} })
    try {
      await sql.unsafe(`UPDATE batches SET ${assignment} WHERE id = $1`, [batchId])
    } finally {
      await sql.end()
    }
    return
  }
  const db = openStoreFile(gw.env.MULTIGRID_DATA_DIR)
  try {
    db.query(`UPDATE batches SET ${assignment} WHERE id = ?`).run(batchId)
  } finally {
    db.close()
  }
}
