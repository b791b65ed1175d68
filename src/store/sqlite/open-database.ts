/** One connection to the embedded store's file, set up the same way on every thread. */
import { Database } from 'bun:sqlite'

export function openSqliteDatabase(path: string): Database {
  const db = new Database(path, { create: true })
  // 16 KiB pages (only takes effect on a new file): batch lines are ~300-byte rows written
  // 50,000 at a time, and bigger pages cut admission's page writes by a third.
  db.exec('PRAGMA page_size = 16384')
  db.exec('PRAGMA journal_mode = WAL')
  db.exec('PRAGMA synchronous = NORMAL')
  // Several connections share the file (the HTTP side and the background threads): a writer
  // waits for another's transaction, which lasts milliseconds, instead of failing.
  db.exec('PRAGMA busy_timeout = 5000')
  // No connection copies the log into the database at COMMIT: that waits on the disk, and the
  // checkpoint thread (checkpoint-thread.ts) is the only checkpointer.
  db.exec('PRAGMA wal_autocheckpoint = 0')
  db.exec('PRAGMA foreign_keys = ON')
  return db
}
