/**
 * The embedded store on bun:sqlite: one file under the data dir, WAL mode so readers never wait
 * for the dispatcher's writes. Every multi-row change runs in one IMMEDIATE transaction, so the
 * process can be killed at any point without half-written state. One process only: several
 * instances need PostgreSQL. Each role lives in its folder (src/store/<role>/); this file opens
 * the database and composes them.
 */
import type { Database } from 'bun:sqlite'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { createSqliteAccountStore } from '../accounts/sqlite-accounts.ts'
import { createSqliteChunkStore } from '../batch-chunks/sqlite-chunks.ts'
import { createSqliteBatchStore } from '../batches/sqlite-batches.ts'
import { createAdmissionThread, type AdmissionThread } from '../batches/sqlite-admission-thread.ts'
import { createSqliteCreditStore } from '../credit/sqlite-credit.ts'
import { createDispatchThread, type DispatchThread } from '../dispatch/dispatch-thread.ts'
import { createSqliteDispatch } from '../dispatch/sqlite-dispatch.ts'
import { releaseDeadRunLeases } from '../dispatch/sqlite-leases.ts'
import { createSqliteFileStore } from '../files/sqlite-files.ts'
import { createSqliteFineTuneStore } from '../fine-tunes/sqlite-fine-tunes.ts'
import { createSqliteRetentionStore } from '../retention/sqlite-retention.ts'
import type { OpenedStore, RoleStores, Store } from '../store.ts'
import { createSqliteUsageStore } from '../usage/sqlite-usage.ts'
import { createSqliteWebhookStore } from '../webhooks/sqlite-webhooks.ts'
import { startCheckpointThread, type CheckpointThread } from './checkpoint-thread.ts'
import { migrateSqlite } from './migrate.ts'
import { openSqliteDatabase } from './open-database.ts'

/**
 * Opens (creating if needed) `<dataDir>/multigrid.sqlite`, or `:memory:` when dataDir is null,
 * and applies pending migrations (migrate.ts). With a file, the dispatcher's statements run on a
 * thread of their own (dispatch/dispatch-thread.ts), and so do admissions
 * (batches/sqlite-admission-thread.ts) and checkpoints (checkpoint-thread.ts); in memory they run
 * on the same connection. Closing the store closes them all. `dataDirLocked`: this process holds
 * the data dir's lock (data-dir-lock.ts), so the line leases a crashed run left are handed back
 * before anything claims (dispatch/sqlite-leases.ts); the admin CLI, beside a running gateway,
 * leaves them.
 */
export function createSqliteStore(
  dataDir: string | null,
  options: { dataDirLocked?: boolean } = {},
): OpenedStore {
  if (!dataDir) {
    const db = openSqliteDatabase(':memory:')
    migrateSqlite(db)
    return {
      store: new SqliteStore(db, null, null, null),
      dispatch: createSqliteDispatch(db),
      chunks: createSqliteChunkStore(db),
    }
  }
  mkdirSync(dataDir, { recursive: true })
  const path = join(dataDir, 'multigrid.sqlite')
  const db = openSqliteDatabase(path)
  try {
    migrateSqlite(db)
    if (options.dataDirLocked) releaseDeadRunLeases(db)
  } catch (error) {
    db.close()
    throw error
  }
  const dispatch = createDispatchThread(
    new URL('../dispatch/sqlite-dispatch-worker.ts', import.meta.url),
    [path],
  )
  const admission = createAdmissionThread(path)
  const store = new SqliteStore(db, dispatch, admission, startCheckpointThread(path))
  return { store, dispatch, chunks: createSqliteChunkStore(db) }
}

/** The roles' calls (src/store/<role>/), each given the connection only. */
const sqliteRoles = (db: Database): RoleStores => ({
  ...createSqliteBatchStore(db),
  ...createSqliteAccountStore(db),
  ...createSqliteCreditStore(db),
  ...createSqliteFileStore(db),
  ...createSqliteRetentionStore(db),
  ...createSqliteUsageStore(db),
  ...createSqliteFineTuneStore(db),
  ...createSqliteWebhookStore(db),
})

// The roles' calls are set on the store by its constructor (sqliteRoles).
interface SqliteStore extends RoleStores {}

/** Every role but dispatch (src/store/dispatch/), composed; it closes the dispatch thread. */
class SqliteStore implements Store {
  readonly kind = 'sqlite' as const
  constructor(
    private readonly db: Database,
    private readonly dispatchThread: DispatchThread | null,
    private readonly admission: AdmissionThread | null,
    private readonly checkpoints: CheckpointThread | null,
  ) {
    Object.assign(this, sqliteRoles(db))
    if (admission) this.admitBatch = (batch) => admission.admitBatch(batch)
  }

  async ping() {
    this.db.query('SELECT 1').get()
  }

  async close() {
    await this.dispatchThread?.close()
    await this.admission?.close()
    await this.checkpoints?.close()
    this.db.close()
  }
}
