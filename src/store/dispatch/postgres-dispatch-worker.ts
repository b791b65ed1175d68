/** The PostgreSQL dispatch thread (../dispatch-thread.ts): PostgresDispatch on a pool of its own. */
import { serveDispatch } from './dispatch-worker-host.ts'
import { connectPostgres, type PostgresConnection } from '../postgres/connect.ts'
import { PostgresDispatch } from './postgres-dispatch.ts'

serveDispatch(([connection]) => {
  const sql = connectPostgres(connection as PostgresConnection)
  return { dispatch: new PostgresDispatch(sql), close: () => sql.end({ timeout: 5 }) }
})
