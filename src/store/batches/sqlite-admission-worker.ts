/** The admission thread (sqlite-admission-thread.ts): admitBatch on a connection of its own. */
import { lowerThreadPriority } from '../../threads/background-priority.ts'
import { nameThread } from '../../threads/thread-name.ts'
import type { Database } from 'bun:sqlite'
import { openSqliteDatabase } from '../sqlite/open-database.ts'
import type { AdmitResult, NewBatch } from './batch-store.ts'
import { fromColumns, type LineColumns } from './line-columns.ts'
import { admitBatch } from './sqlite-admit-batch.ts'

export type AdmissionRequest =
  | { id: number; kind: 'open'; path: string }
  | { id: number; kind: 'admit'; batch: Omit<NewBatch, 'lines'>; lines: LineColumns }
  | { id: number; kind: 'close' }

export type AdmissionReply =
  { id: number; ok: true; value: AdmitResult } | { id: number; ok: false; message: string }

declare const self: Worker
let db: Database | null = null

nameThread('mg-admission')

self.onmessage = (event: MessageEvent<AdmissionRequest>) => {
  const request = event.data
  if (request.kind === 'open') {
    // Background work: it must not take the event loop's core.
    lowerThreadPriority()
    db = openSqliteDatabase(request.path)
    return
  }
  if (request.kind === 'close') {
    db?.close()
    db = null
    self.postMessage({ id: request.id, ok: true, value: null as never } satisfies AdmissionReply)
    return
  }
  let reply: AdmissionReply
  try {
    const value = admitBatch(db!, { ...request.batch, lines: fromColumns(request.lines) })
    reply = { id: request.id, ok: true, value }
  } catch (error) {
    reply = { id: request.id, ok: false, message: (error as Error).message }
  }
  self.postMessage(reply)
}
