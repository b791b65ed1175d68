/**
 * Picks the stores from the configuration: PostgreSQL when DATABASE_URL is set (records and file
 * content in the database, shared by every instance), else SQLite and files in the data dir.
 * A `search_path` query parameter on DATABASE_URL selects (and creates) a schema of its own.
 * Every PostgreSQL connection is opened through postgres/connect.ts, with the same settings.
 */
import type { Config } from '../config.ts'
import type { BlobStore } from './files/blob-store.ts'
import { createDiskBlobStore } from './files/disk-blob-store.ts'
import { createSqliteStore } from './sqlite/sqlite-store.ts'
import type { StoreChannel } from './store-channel.ts'
import type { OpenedStore } from './store.ts'

type StoreConfig = Pick<Config, 'databaseUrl' | 'dataDir' | 'dispatchConnections'>

/** The store, and apart from it the dispatcher's part (see OpenedStore). `collectGarbage`: called in
 * the bulk write of a batch's lines, where that makes much garbage (PostgreSQL's COPY).
 * `dataDirLocked`: the caller holds the data dir's lock (embedded store only; see createSqliteStore). */
export async function openStore(
  config: StoreConfig,
  hooks: { collectGarbage?: () => void; dataDirLocked?: boolean } = {},
): Promise<OpenedStore> {
  if (config.databaseUrl) {
    const { url, schema } = splitSchema(config.databaseUrl)
    const { createPostgresStore } = await import('./postgres/postgres-store.ts')
    return createPostgresStore(url, {
      schema,
      collectGarbage: hooks.collectGarbage,
      dispatchConnections: config.dispatchConnections,
    })
  }
  return createSqliteStore(config.dataDir, { dataDirLocked: hooks.dataDirLocked })
}

/** File content: 1 MiB chunks in PostgreSQL (a pool of its own, so uploads never wait for the store's), else files in the data dir. */
export async function openBlobStore(config: StoreConfig): Promise<BlobStore> {
  if (config.databaseUrl) {
    const { url, schema } = splitSchema(config.databaseUrl)
    const [{ connectPostgres }, { createPostgresBlobStore }] = await Promise.all([
      import('./postgres/connect.ts'),
      import('./files/postgres-blob-store.ts'),
    ])
    return createPostgresBlobStore(
      connectPostgres({ url, schema, max: 4, name: 'multigrid files' }),
    )
  }
  return createDiskBlobStore(config.dataDir)
}

/**
 * The channel `name` between the instances sharing the store: on PostgreSQL, LISTEN/NOTIFY
 * (postgres/channel.ts); null on SQLite, whose store has one process.
 */
export async function openStoreChannel(
  config: StoreConfig,
  name: string,
): Promise<StoreChannel | null> {
  if (!config.databaseUrl) return null
  const { openPostgresChannel } = await import('./postgres/channel.ts')
  return openPostgresChannel(splitSchema(config.databaseUrl), name)
}

/** DATABASE_URL without its search_path parameter, and the schema that parameter names. */
export function splitSchema(databaseUrl: string): { url: string; schema: string | undefined } {
  const url = new URL(databaseUrl)
  const schema = url.searchParams.get('search_path') ?? undefined
  url.searchParams.delete('search_path')
  return { url: url.toString(), schema }
}
