/**
 * The embedded store belongs to one gateway process (sqlite/sqlite-store.ts). A second gateway started on
 * the same data dir would take the first one's uploads in progress for what a crashed run left
 * (the janitor's start-up sweep deletes them) and send twice the providers' concurrency. So a
 * gateway holds an exclusive lock on `gateway.lock` in its data dir while it runs, and a second
 * one is refused at start. The operating system drops the lock when the process ends, SIGKILL
 * included, so a restart after a crash takes it again at once. The admin command line opens the
 * store without it, beside a running gateway.
 */
import { Database } from 'bun:sqlite'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'

export const LOCK_FILE = 'gateway.lock'

/** Another gateway process (or another gateway in this one) runs on the data dir. */
export class DataDirInUse extends Error {
  constructor(readonly dataDir: string) {
    super(
      `${dataDir} is in use by another gateway: the embedded store takes one process; stop that one first, or set DATABASE_URL to run several instances on PostgreSQL`,
    )
  }
}

export interface DataDirLock {
  release(): void
}

/** Takes the data dir's lock at once, or throws DataDirInUse. */
export function lockDataDir(dataDir: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true })
  const db = new Database(join(dataDir, LOCK_FILE), { create: true })
  db.exec('PRAGMA busy_timeout = 0')
  try {
    // A write transaction left open: SQLite's file lock, held until the connection closes.
    db.exec('BEGIN EXCLUSIVE')
  } catch (error) {
    db.close()
    if ((error as { code?: unknown }).code === 'SQLITE_BUSY') throw new DataDirInUse(dataDir)
    throw error
  }
  return { release: () => db.close() }
}
