/** The SQLite dispatch thread (../dispatch-thread.ts): the SQLite dispatch role on a connection of its own. */
import { serveDispatch } from './dispatch-worker-host.ts'
import { openSqliteDatabase } from '../sqlite/open-database.ts'
import { createSqliteDispatch } from './sqlite-dispatch.ts'

serveDispatch(([path]) => {
  const db = openSqliteDatabase(path as string)
  // Statement journals in memory. A claim (a multi-row UPDATE … RETURNING) keeps one, and past
  // 64 KiB (four of the store's 16 KiB pages) SQLite puts it in a temp file it creates, writes
  // and deletes on every claim: 1.2 µs of CPU a line in claims of 64. This thread's statements
  // are small; the largest, expiring a batch's pending lines, holds about 0.5 KB a line while it
  // runs.
  db.exec('PRAGMA temp_store = MEMORY')
  return { dispatch: createSqliteDispatch(db), close: () => db.close() }
})
