/** The dispatch thread (dispatch-thread.ts): runs SqliteDispatch on its own connection. */
import type { Database } from 'bun:sqlite'
import type { DispatchStore } from '../store.ts'
import { scheduleAsBatch } from './batch-scheduling.ts'
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
let checkpoints: ReturnType<typeof setInterval> | null = null

/** Often enough that the log stays a few megabytes; PASSIVE never waits for the other writer. */
const CHECKPOINT_EVERY_MS = 1000

self.onmessage = async (event: MessageEvent<DispatchRequest>) => {
  const { id, method, args } = event.data
  if (method === 'open') {
    scheduleAsBatch()
    db = openSqliteDatabase(args[0] as string)
    dispatch = new SqliteDispatch(db)
    checkpoints = setInterval(() => {
      try {
        db?.exec('PRAGMA wal_checkpoint(PASSIVE)')
      } catch {
        // Busy or closing: the next one catches up.
      }
    }, CHECKPOINT_EVERY_MS)
    return
  }
  let reply: DispatchReply
  try {
    if (method === 'close') {
      if (checkpoints) clearInterval(checkpoints)
      db?.exec('PRAGMA wal_checkpoint(PASSIVE)')
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
