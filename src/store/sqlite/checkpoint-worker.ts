/** The checkpoint thread (checkpoint-thread.ts): copies the write-ahead log into the database. */
import type { Database } from 'bun:sqlite'
import { lowerThreadPriority } from '../../threads/background-priority.ts'
import { nameThread } from '../../threads/thread-name.ts'
import { openSqliteDatabase } from './open-database.ts'

export type CheckpointRequest =
  { method: 'open'; path: string; everyMs: number } | { method: 'close' }

declare const self: Worker

let db: Database | null = null
let timer: ReturnType<typeof setInterval> | null = null

nameThread('mg-checkpoint')

/** PASSIVE: copies what no reader still needs and never waits for, or blocks, the writers. */
function checkpoint() {
  try {
    db?.exec('PRAGMA wal_checkpoint(PASSIVE)')
  } catch {
    // Busy or closing: the next one catches up.
  }
}

self.onmessage = (event: MessageEvent<CheckpointRequest>) => {
  const request = event.data
  if (request.method === 'open') {
    // Background work: its wake-ups must not take the event loop's core.
    lowerThreadPriority()
    db = openSqliteDatabase(request.path)
    timer = setInterval(checkpoint, request.everyMs)
    return
  }
  if (timer) clearInterval(timer)
  checkpoint()
  db?.close()
  db = null
  postMessage('closed')
}
