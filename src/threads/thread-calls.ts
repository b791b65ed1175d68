/**
 * Calls to a background thread (background-thread.ts) that answers each message with one reply
 * carrying the message's `id`: the stores' dispatch threads, SQLite's admission thread and the
 * validation threads. The thread starts at once, and again on the next call after one died,
 * which fails the calls it held. It keeps the process alive only while a call is under way.
 */
import { startBackgroundThread } from './background-thread.ts'

export interface ThreadCalls<Reply> {
  /** Posts `message` with an `id` of its own; resolves with the reply that carries it. */
  call(message: Record<string, unknown>, transfer?: Bun.Transferable[]): Promise<Reply>
  /** Whether a thread is running (none after terminate(), or once one died until the next call). */
  readonly running: boolean
  /** Stops the thread; the calls under way fail. */
  terminate(): void
}

/**
 * `name` is for errors ("the dispatch thread stopped: …"); `greet` posts what a new thread must
 * hear before its first call (where its connection goes, its catalog).
 */
export function createThreadCalls<Reply extends { id: number }>(
  script: URL,
  name: string,
  greet: (worker: Bun.Worker) => void,
): ThreadCalls<Reply> {
  let worker: Bun.Worker | null = null
  let nextId = 0
  const waiting = new Map<
    number,
    { resolve: (reply: Reply) => void; reject: (error: Error) => void }
  >()

  const failAll = (error: Error) => {
    for (const call of waiting.values()) call.reject(error)
    waiting.clear()
  }

  const spawn = (): Bun.Worker => {
    const thread = startBackgroundThread(script, (reason) => {
      if (worker !== thread) return
      worker = null
      failAll(new Error(`the ${name} thread stopped: ${reason}`))
    })
    thread.addEventListener('message', (event) => {
      const reply = (event as MessageEvent<Reply>).data
      const call = waiting.get(reply.id)
      if (!call) return
      waiting.delete(reply.id)
      if (waiting.size === 0) thread.unref()
      call.resolve(reply)
    })
    greet(thread)
    return thread
  }

  worker = spawn()

  return {
    call: (message, transfer) =>
      new Promise<Reply>((resolve, reject) => {
        worker ??= spawn()
        const id = nextId++
        if (waiting.size === 0) worker.ref()
        waiting.set(id, { resolve, reject })
        worker.postMessage({ ...message, id }, transfer ?? [])
      }),
    get running() {
      return worker !== null
    },
    terminate() {
      const current = worker
      worker = null
      current?.terminate()
      failAll(new Error(`the ${name} thread was stopped`))
    },
  }
}
