/**
 * The dispatcher's store calls on a thread of their own. Claiming and recording take tens of
 * microseconds per line (SQLite statements, or the PostgreSQL driver's parsing and serializing);
 * at thousands of lines a second on the event loop they delay every upstream answer waiting to
 * be read. On a Worker with its own connection (a SQLite file in WAL mode, or a PostgreSQL pool)
 * they overlap with the HTTP work. The thread keeps the process alive only while a call is under
 * way. `script` is a module that calls serveDispatch (dispatch-worker-host.ts).
 */
import { startBackgroundThread } from '../threads/background-thread.ts'
import type { DispatchReply, DispatchRequest } from './dispatch-worker-host.ts'
import type { DispatchStore } from './store.ts'

export type DispatchThread = DispatchStore & { close(): Promise<void> }

type Method = keyof DispatchStore

/** `openArgs` go to the worker's `open`: where its connection goes. */
export function createDispatchThread(script: URL, openArgs: unknown[]): DispatchThread {
  let worker: Bun.Worker | null = null
  let nextId = 0
  const waiting = new Map<number, { resolve: (value: any) => void; reject: (error: Error) => void }>()

  const failAll = (error: Error) => {
    for (const call of waiting.values()) call.reject(error)
    waiting.clear()
  }

  const spawn = (): Bun.Worker => {
    // A thread that died takes its calls with it; the next call starts a new one.
    const thread = startBackgroundThread(script, (reason) => {
      if (worker !== thread) return
      worker = null
      failAll(new Error(`the dispatch thread stopped: ${reason}`))
    })
    thread.addEventListener('message', (event) => {
      const reply = (event as MessageEvent<DispatchReply>).data
      const call = waiting.get(reply.id)
      if (!call) return
      waiting.delete(reply.id)
      if (waiting.size === 0) thread.unref()
      if (reply.ok) call.resolve(reply.value)
      else call.reject(new Error(reply.message))
    })
    thread.postMessage({ id: -1, method: 'open', args: openArgs } satisfies DispatchRequest)
    return thread
  }

  worker = spawn()

  const call = (method: Method | 'close', args: unknown[]): Promise<any> =>
    new Promise((resolve, reject) => {
      worker ??= spawn()
      const id = nextId++
      if (waiting.size === 0) worker.ref()
      waiting.set(id, { resolve, reject })
      worker.postMessage({ id, method, args } satisfies DispatchRequest)
    })

  return {
    runnableBatches: (...args) => call('runnableBatches', args),
    claimLines: (...args) => call('claimLines', args),
    batchStatuses: (...args) => call('batchStatuses', args),
    renewLeases: (...args) => call('renewLeases', args),
    recordOutcomes: (...args) => call('recordOutcomes', args),
    releaseLeases: (...args) => call('releaseLeases', args),
    reapExpiredLeases: (...args) => call('reapExpiredLeases', args),
    advanceBatches: (...args) => call('advanceBatches', args),
    async close() {
      const thread = worker
      if (!thread) return
      await call('close', [])
      worker = null
      thread.terminate()
    },
  }
}
