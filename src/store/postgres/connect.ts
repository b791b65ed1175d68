/**
 * Every PostgreSQL connection the gateway opens is opened here, set up the same way: the store's
 * pool, its dispatch thread's pool, the file content pool (src/store/files/postgres-blob-store.ts) and
 * the LISTEN/NOTIFY connection (channel.ts).
 */
import postgres from 'postgres'

/** Where a pool connects: the database and, for a store of its own, the schema. */
export interface PostgresConnection {
  url: string
  schema?: string
  max: number
  /** Seconds before an unused connection is closed; by default they stay open. */
  idleTimeoutSeconds?: number
  /** Its `application_name`, so pg_stat_activity tells the pools apart; postgres.js's by default. */
  name?: string
}

/** A connection pool set up the same way on every thread. */
export function connectPostgres({
  url,
  schema,
  max,
  idleTimeoutSeconds,
  name,
}: PostgresConnection): postgres.Sql {
  // postgres.js reconnects by itself: a query issued while the server is away fails, the next
  // one after it is back opens a new connection (checked by terminating the backend).
  return postgres(url, {
    max,
    onnotice: () => {},
    transform: { undefined: null },
    connection: {
      ...(schema ? { search_path: schema } : {}),
      ...(name ? { application_name: name } : {}),
    },
    ...(idleTimeoutSeconds === undefined ? {} : { idle_timeout: idleTimeoutSeconds }),
  })
}
