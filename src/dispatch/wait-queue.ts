/** A queue of callers waiting for a slot, each able to give up through its AbortSignal. */
export type Waiter = () => void

/** Queues a waiter and resolves when it is served, or rejects when `signal` aborts first. */
export function waitInQueue(waiters: Waiter[], signal: AbortSignal | undefined, kick: () => void): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const waiter = () => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }
    const onAbort = () => {
      const index = waiters.indexOf(waiter)
      if (index !== -1) waiters.splice(index, 1)
      reject(signal!.reason)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
    waiters.push(waiter)
    kick()
  })
}
