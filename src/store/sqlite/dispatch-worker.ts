/** The dispatch thread (dispatch-thread.ts): runs SqliteDispatch on its own connection. */
import type { Database } from 'bun:sqlite'
import type { DispatchStore } from '../store.ts'
import { lowerThreadPriority } from './background-priority.ts'
import { openSqliteDatabase } from './open-database.ts'
import { SqliteDispatch } from './sqlite-dispatch.ts'

export interface DispatchRequest {
  id: number
  method: keyof DispatchStore | 'open' | 'close'
  args: unknown[]
}

export type DispatchReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; message: string }

declare const self: Worker

let db: Database | null = null
let dispatch: SqliteDispatch | null = null

self.onmessage = async (event: MessageEvent<DispatchRequest>) => {
  const { id, method, args } = event.data
  if (method === 'open') {
    lowerThreadPriority()
    db = openSqliteDatabase(args[0] as string)
    dispatch = new SqliteDispatch(db)
    return
  }
  let reply: DispatchReply
  try {
    if (method === 'close') {
      db?.close()
      db = dispatch = null
      reply = { id, ok: true, value: null }
    } else {
      const run = dispatch![method] as (...args: unknown[]) => Promise<unknown>
      reply = { id, ok: true, value: await run.apply(dispatch, args) }
    }
  } catch (error) {
    reply = { id, ok: false, message: (error as Error).message }
  }
  postMessage(reply)
}
