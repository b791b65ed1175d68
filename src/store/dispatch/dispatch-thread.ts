/**
 * The dispatcher's store calls on a thread of their own. Claiming and recording take tens of
 * microseconds per line (SQLite statements, or the PostgreSQL driver's parsing and serializing);
 * at thousands of lines a second on the event loop they delay every upstream answer waiting to
 * be read. On a Worker with its own connection (a SQLite file in WAL mode, or a PostgreSQL pool)
 * they overlap with the HTTP work. The thread keeps the process alive only while a call is under
 * way. `script` is a module that calls serveDispatch (dispatch-worker-host.ts).
 */
import { createThreadCalls } from '../../threads/thread-calls.ts'
import type { DispatchReply, DispatchRequest } from './dispatch-worker-host.ts'
import type { DispatchStore } from './dispatch-store.ts'

export type DispatchThread = DispatchStore & { close(): Promise<void> }

type Method = keyof DispatchStore
type Result<M extends Method> = Awaited<ReturnType<DispatchStore[M]>>

/** `openArgs` go to the worker's `open`: where its connection goes. */
export function createDispatchThread(script: URL, openArgs: unknown[]): DispatchThread {
  const thread = createThreadCalls<DispatchReply>(script, 'dispatch', (worker) =>
    worker.postMessage({ id: -1, method: 'open', args: openArgs } satisfies DispatchRequest),
  )

  const send = async (method: Method | 'close', args: unknown[]): Promise<unknown> => {
    const reply = await thread.call({ method, args } satisfies Omit<DispatchRequest, 'id'>)
    if (!reply.ok) throw new Error(reply.message)
    return reply.value
  }
  // The worker runs the same method of a DispatchStore (dispatch-worker-host.ts), so its reply
  // is that method's result, copied across by structured clone.
  const call = <M extends Method>(method: M, args: Parameters<DispatchStore[M]>) =>
    send(method, args) as Promise<Result<M>>

  return {
    runnableBatches: (...args) => call('runnableBatches', args),
    queuedLines: (...args) => call('queuedLines', args),
    claimLines: (...args) => call('claimLines', args),
    nextLine: (...args) => call('nextLine', args),
    leaveLane: (...args) => call('leaveLane', args),
    laneLinesPending: (...args) => call('laneLinesPending', args),
    batchStatuses: (...args) => call('batchStatuses', args),
    renewLeases: (...args) => call('renewLeases', args),
    recordOutcomes: (...args) => call('recordOutcomes', args),
    releaseLeases: (...args) => call('releaseLeases', args),
    reapExpiredLeases: (...args) => call('reapExpiredLeases', args),
    advanceBatches: (...args) => call('advanceBatches', args),
    setWaiting: (...args) => call('setWaiting', args),
    recordEtas: (...args) => call('recordEtas', args),
    async close() {
      if (!thread.running) return
      await send('close', [])
      thread.terminate()
    },
  }
}
