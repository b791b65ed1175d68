/**
 * A queue of callers waiting for a slot, each able to give up through its AbortSignal, served by
 * rank: the lowest first, callers of one rank in the order they asked. A batch line's rank is its
 * deadline (ms), so lines due earlier get a provider's capacity first (docs/open-models.md), and a live
 * call's is 0: it is served before any line queued at the same provider.
 */
import { followAbort } from '../../providers/follow-abort.ts'

export interface Waiter {
  (): void
  rank: number
}

/**
 * Queues a waiter and resolves when it is served, or rejects when `signal` aborts first.
 * `granted` runs the moment it is served, inside the call that served it (see ProviderGate);
 * `rank` places it (0 unless given).
 */
export function waitInQueue(
  waiters: Waiter[],
  signal: AbortSignal | undefined,
  kick: () => void,
  { granted, rank = 0 }: { granted?: () => void; rank?: number } = {},
): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason)
  return new Promise<void>((resolve, reject) => {
    const waiter: Waiter = Object.assign(
      () => {
        unfollow?.()
        granted?.()
        resolve()
      },
      { rank },
    )
    const unfollow = signal
      ? followAbort(signal, () => {
          const index = waiters.indexOf(waiter)
          if (index !== -1) waiters.splice(index, 1)
          reject(signal.reason)
        })
      : null
    // After every waiter of its rank or lower: most arrive in rank order, found from the end.
    let at = waiters.length
    while (at > 0 && waiters[at - 1].rank > rank) at--
    waiters.splice(at, 0, waiter)
    kick()
  })
}
