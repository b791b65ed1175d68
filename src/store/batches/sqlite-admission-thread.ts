/**
 * Admission on the embedded store, on a thread with a connection of its own: storing a batch's
 * lines is SQLite statements for every line (about 0.1 s for 50,000), which on the event loop
 * held every other account's calls for as long. The transaction is the same (sqlite-admit-batch.ts);
 * the lines cross as columns (line-columns.ts), a shared body without a copy.
 */
import { createThreadCalls } from '../../threads/thread-calls.ts'
import type { AdmitResult, NewBatch } from './batch-store.ts'
import { toColumns } from './line-columns.ts'
import type { AdmissionReply, AdmissionRequest } from './sqlite-admission-worker.ts'

export interface AdmissionThread {
  admitBatch(batch: NewBatch): Promise<AdmitResult>
  close(): Promise<void>
}

/** A thread admitting batches into the SQLite file at `path`. */
export function createAdmissionThread(path: string): AdmissionThread {
  const thread = createThreadCalls<AdmissionReply>(
    new URL('./sqlite-admission-worker.ts', import.meta.url),
    'admission',
    (worker) => worker.postMessage({ id: -1, kind: 'open', path } satisfies AdmissionRequest),
  )
  return {
    async admitBatch(batch) {
      const { lines, ...rest } = batch
      const { columns, transfer } = toColumns(lines)
      const reply = await thread.call({ kind: 'admit', batch: rest, lines: columns }, transfer)
      if (!reply.ok) throw new Error(reply.message)
      return reply.value
    },
    async close() {
      if (!thread.running) return
      await thread.call({ kind: 'close' })
      thread.terminate()
    },
  }
}
