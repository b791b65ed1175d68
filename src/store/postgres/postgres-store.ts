/**
 * The shared store on PostgreSQL (`postgres`, porsager), for several gateway instances on one
 * database. Semantics are the embedded store's (src/store/sqlite/sqlite-store.ts); how races
 * between instances are kept out is each role's (src/store/<role>/), as is its SQL: this file
 * connects, migrates and composes them. Money stays `numeric` in SQL and decimal strings in code;
 * bigint columns come back as strings and are turned into numbers by each role's rows.
 */
import type postgres from 'postgres'
import { createPostgresAccountStore } from '../accounts/postgres-accounts.ts'
import { createPostgresChunkStore } from '../batch-chunks/postgres-chunks.ts'
import { createPostgresBatchStore } from '../batches/postgres-batches.ts'
import { createPostgresCreditStore } from '../credit/postgres-credit.ts'
import { createDispatchThread, type DispatchThread } from '../dispatch/dispatch-thread.ts'
import { createPostgresFileStore } from '../files/postgres-files.ts'
import { createPostgresFineTuneStore } from '../fine-tunes/postgres-fine-tunes.ts'
import { createPostgresRetentionStore } from '../retention/postgres-retention.ts'
import type { OpenedStore, RoleStores, Store } from '../store.ts'
import { createPostgresUsageStore } from '../usage/postgres-usage.ts'
import { createPostgresWebhookStore } from '../webhooks/postgres-webhooks.ts'
import { connectPostgres, type PostgresConnection } from './connect.ts'
import { migrate } from './migrate.ts'

export interface PostgresStoreOptions {
  /** A schema of its own (created and migrated if missing), e.g. one per test file. */
  schema?: string
  /** Pool size; default 10. */
  max?: number
  /** Called every few megabytes of a batch's COPY data (batches/postgres-copy-lines.ts). */
  collectGarbage?: () => void
  /** The dispatch thread's pool size; default 1 (MULTIGRID_DISPATCH_CONNECTIONS, docs/scale.md). */
  dispatchConnections?: number
}

const SCHEMA_NAME = /^[a-z_][a-z0-9_]{0,62}$/

/**
 * Connects, applies pending migrations, and returns the store and, apart, the dispatcher's calls,
 * which run on a thread of their own with a pool of their own (src/store/dispatch/). Closing
 * the store closes that thread too.
 */
export async function createPostgresStore(
  url: string,
  options: PostgresStoreOptions = {},
): Promise<OpenedStore> {
  const { schema } = options
  if (schema !== undefined && !SCHEMA_NAME.test(schema)) {
    throw new Error(`schema ${JSON.stringify(schema)}: use lower-case letters, digits and _`)
  }
  const sql = connectPostgres({ url, schema, max: options.max ?? 10, name: 'multigrid store' })
  try {
    await migrate(sql, { schema })
  } catch (error) {
    await sql.end({ timeout: 1 })
    throw error
  }
  // The dispatch thread's pool: claims, recorded outcomes and maintenance.
  const connection: PostgresConnection = { url, schema, max: options.dispatchConnections ?? 1 }
  const dispatch = createDispatchThread(
    new URL('../dispatch/postgres-dispatch-worker.ts', import.meta.url),
    [connection],
  )
  const store = new PostgresStore(sql, dispatch, options.collectGarbage)
  return { store, dispatch, chunks: createPostgresChunkStore(sql) }
}

/** The roles' calls (src/store/<role>/), each given the connection only. */
const postgresRoles = (sql: postgres.Sql, collectGarbage?: () => void): RoleStores => ({
  ...createPostgresBatchStore(sql, { collectGarbage }),
  ...createPostgresAccountStore(sql),
  ...createPostgresCreditStore(sql),
  ...createPostgresFileStore(sql),
  ...createPostgresRetentionStore(sql),
  ...createPostgresUsageStore(sql),
  ...createPostgresFineTuneStore(sql),
  ...createPostgresWebhookStore(sql),
})

// The roles' calls are set on the store by its constructor (postgresRoles).
interface PostgresStore extends RoleStores {}

/** Every role but dispatch (src/store/dispatch/), composed; it closes the dispatch thread. */
class PostgresStore implements Store {
  readonly kind = 'postgres' as const
  constructor(
    private readonly sql: postgres.Sql,
    private readonly dispatchThread: DispatchThread,
    collectGarbage?: () => void,
  ) {
    Object.assign(this, postgresRoles(sql, collectGarbage))
  }

  async ping() {
    await this.sql`SELECT 1`
  }

  async close() {
    await this.dispatchThread.close()
    await this.sql.end({ timeout: 5 })
  }
}
