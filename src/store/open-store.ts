/** Picks the store from the configuration: PostgreSQL when DATABASE_URL is set, else SQLite. */
import type { Config } from '../config.ts'
import { createSqliteStore } from './sqlite/sqlite-store.ts'
import type { Store } from './store.ts'

export async function openStore(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<Store> {
  if (config.databaseUrl) {
    const { createPostgresStore } = await import('./postgres/postgres-store.ts')
    return createPostgresStore(config.databaseUrl)
  }
  return createSqliteStore(config.dataDir)
}
