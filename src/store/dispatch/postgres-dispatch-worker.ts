/** The PostgreSQL dispatch thread (../dispatch-thread.ts): the PostgreSQL dispatch role on a pool of its own. */
import { serveDispatch } from './dispatch-worker-host.ts'
import { connectPostgres, type PostgresConnection } from '../postgres/connect.ts'
import { createPostgresDispatch } from './postgres-dispatch.ts'

serveDispatch(([connection]) => {
  const sql = connectPostgres({
    ...(connection as PostgresConnection),
    name: 'multigrid dispatch',
  })
  return { dispatch: createPostgresDispatch(sql), close: () => sql.end({ timeout: 5 }) }
})
