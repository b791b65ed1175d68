/** A queue of callers waiting for a slot, each able to give up through its AbortSignal. */
import { followAbort } from '../../providers/follow-abort.ts'

export type Waiter = () => void

/**
 * Queues a waiter and resolves when it is served, or rejects when `signal` aborts first.
 * `granted` runs the moment it is served, inside the call that served it (see ProviderGate).
 */
export function waitInQueue(
  waiters: Waiter[],
  signal: AbortSignal | undefined,
  kick: () => void,
  granted?: () => void,
): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason)
  return new Promise<void>((resolve, reject) => {
    const waiter = () => {
      unfollow?.()
      granted?.()
      resolve()
    }
    const unfollow = signal
      ? followAbort(signal, () => {
          const index = waiters.indexOf(waiter)
          if (index !== -1) waiters.splice(index, 1)
          reject(signal.reason)
        })
      : null
    waiters.push(waiter)
    kick()
  })
}
