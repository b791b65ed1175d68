/** The SQLite dispatch thread (../dispatch-thread.ts): SqliteDispatch on a connection of its own. */
import { serveDispatch } from '../dispatch-worker-host.ts'
import { openSqliteDatabase } from './open-database.ts'
import { SqliteDispatch } from './sqlite-dispatch.ts'

serveDispatch(([path]) => {
  const db = openSqliteDatabase(path as string)
  return { dispatch: new SqliteDispatch(db), close: () => db.close() }
})
