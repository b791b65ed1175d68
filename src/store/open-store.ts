/**
 * Picks the stores from the configuration: PostgreSQL when DATABASE_URL is set (records and file
 * content in the database, shared by every instance), else SQLite and files in the data dir.
 * A `search_path` query parameter on DATABASE_URL selects (and creates) a schema of its own.
 */
import type { Config } from '../config.ts'
import type { BlobStore } from '../files/blob-store.ts'
import { createDiskBlobStore } from '../files/disk-blob-store.ts'
import { createSqliteStore } from './sqlite/sqlite-store.ts'
import type { Store } from './store.ts'

/** `collectGarbage`: called in the bulk write of a batch's lines, where that makes much garbage (PostgreSQL's COPY). */
export async function openStore(config: Pick<Config, 'databaseUrl' | 'dataDir'>, hooks: { collectGarbage?: () => void } = {}): Promise<Store> {
  if (config.databaseUrl) {
    const { url, schema } = splitSchema(config.databaseUrl)
    const { createPostgresStore } = await import('./postgres/postgres-store.ts')
    return createPostgresStore(url, { schema, collectGarbage: hooks.collectGarbage })
  }
  return createSqliteStore(config.dataDir)
}

export async function openBlobStore(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<BlobStore> {
  if (config.databaseUrl) {
    const { url, schema } = splitSchema(config.databaseUrl)
    const { createPostgresBlobStore } = await import('../files/postgres-blob-store.ts')
    return createPostgresBlobStore(url, schema)
  }
  return createDiskBlobStore(config.dataDir)
}

/** DATABASE_URL without its search_path parameter, and the schema that parameter names. */
export function splitSchema(databaseUrl: string): { url: string; schema: string | undefined } {
  const url = new URL(databaseUrl)
  const schema = url.searchParams.get('search_path') ?? undefined
  url.searchParams.delete('search_path')
  return { url: url.toString(), schema }
}
