/** Connection pools to the shared store, the same on the event loop and on the dispatch thread. */
import postgres from 'postgres'

/** Where a pool connects: the database and, for a store of its own, the schema. */
export interface PostgresConnection {
  url: string
  schema?: string
  max: number
}

/** A connection pool set up the same way on every thread. */
export function connectPostgres({ url, schema, max }: PostgresConnection): postgres.Sql {
  // postgres.js reconnects by itself: a query issued while the server is away fails, the next
  // one after it is back opens a new connection (checked by terminating the backend).
  return postgres(url, {
    max,
    onnotice: () => {},
    transform: { undefined: null },
    connection: schema ? { search_path: schema } : {},
  })
}
