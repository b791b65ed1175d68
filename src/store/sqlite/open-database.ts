/** One connection to the embedded store's file, set up the same way on every thread. */
import { Database } from 'bun:sqlite'

const BUSY_TIMEOUT_MS = 5000
const WAL_RETRY_MS = 5

export function openSqliteDatabase(path: string): Database {
  const db = new Database(path, { create: true })
  // Several connections share the file (the HTTP side and the background threads): a writer
  // waits for another's transaction, which lasts milliseconds, instead of failing.
  db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`)
  // 16 KiB pages (only takes effect on a new file): batch lines are ~300-byte rows written
  // 50,000 at a time, and bigger pages cut admission's page writes by a third.
  db.exec('PRAGMA page_size = 16384')
  switchToWal(db)
  db.exec('PRAGMA synchronous = NORMAL')
  // No connection copies the log into the database at COMMIT: that waits on the disk, and the
  // checkpoint thread (checkpoint-thread.ts) is the only checkpointer.
  db.exec('PRAGMA wal_autocheckpoint = 0')
  db.exec('PRAGMA foreign_keys = ON')
  return db
}

/**
 * A new file is switched to WAL by whichever connection gets there first: two processes started
 * on a new data dir, or threads opening it together. SQLite refuses the one that finds another
 * switching it at once, without the busy timeout (waiting could deadlock the two), so it is
 * tried again for as long as the timeout would have waited. On a file already in WAL it is a
 * read.
 */
function switchToWal(db: Database) {
  for (let waitedMs = 0; ; waitedMs += WAL_RETRY_MS) {
    try {
      db.exec('PRAGMA journal_mode = WAL')
      return
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_BUSY' || waitedMs >= BUSY_TIMEOUT_MS)
        throw error
      Bun.sleepSync(WAL_RETRY_MS)
    }
  }
}
