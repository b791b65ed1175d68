/**
 * Checkpoints of the embedded store on a thread of their own: every second, the pages written
 * to the write-ahead log are copied into the database file, which is then fsynced. At full
 * dispatch speed that is tens of milliseconds of waiting on the disk each time (measured:
 * 20–75 ms). On the event loop's connection it would stall requests; on the dispatch thread's
 * it stalled claims and recorded results, and so did SQLite's own automatic checkpoint, which
 * runs inside the COMMIT that takes the log past 1,000 pages (measured: COMMITs of 30–75 ms).
 * Every other connection has automatic checkpoints off; this thread is the only checkpointer.
 */
import { startBackgroundThread } from '../../threads/background-thread.ts'
import type { CheckpointRequest } from './checkpoint-worker.ts'

const CHECKPOINT_EVERY_MS = 1000
const RESPAWN_AFTER_MS = 1000

export interface CheckpointThread {
  /** A last checkpoint, then the thread ends. Safe to call again. */
  close(): Promise<void>
}

export function startCheckpointThread(path: string): CheckpointThread {
  let closing: Promise<void> | null = null
  let thread: Bun.Worker | null = spawn()

  function spawn(): Bun.Worker {
    // Without checkpoints the log would grow without bound: a thread that died is replaced,
    // a second later so that one that cannot start does not spin. Checkpoints never keep the
    // process alive.
    const worker = startBackgroundThread(new URL('./checkpoint-worker.ts', import.meta.url), () => {
      if (thread !== worker) return
      thread = null
      worker.terminate()
      if (closing) return
      setTimeout(() => {
        if (!closing) thread = spawn()
      }, RESPAWN_AFTER_MS).unref()
    })
    worker.postMessage({
      method: 'open',
      path,
      everyMs: CHECKPOINT_EVERY_MS,
    } satisfies CheckpointRequest)
    return worker
  }

  return {
    close() {
      closing ??= new Promise<void>((resolve) => {
        const worker = thread
        if (!worker) return resolve()
        worker.ref()
        const done = () => {
          thread = null
          worker.terminate()
          resolve()
        }
        worker.addEventListener('message', done, { once: true })
        worker.addEventListener('close', done, { once: true })
        worker.postMessage({ method: 'close' } satisfies CheckpointRequest)
      })
      return closing
    },
  }
}
