/**
 * The embedded store's file, opened beside a running gateway the way a test edits or reads it.
 * The gateway's threads write it too: without a busy timeout a statement that meets their write
 * lock fails at once with SQLITE_BUSY instead of waiting its turn (a loaded CI run met one).
 */
import { Database } from 'bun:sqlite'
import { join } from 'node:path'

export function openStoreFile(dataDir: string, options: { readonly?: boolean } = {}): Database {
  const db = new Database(join(dataDir, 'multigrid.sqlite'), options)
  db.exec('PRAGMA busy_timeout = 5000')
  return db
}
