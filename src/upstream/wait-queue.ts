/**
 * A queue of callers waiting for a slot, each able to give up through its AbortSignal.
 *
 * Where a caller waits: a live call (no place) after the live calls already waiting, before any
 * batch line; a batch line at the end, then moved ahead of its own account's lines that are due
 * later, into their positions. So a provider's capacity goes to an account's lines due earlier
 * first (docs/open-models.md: a 24-hour batch before a 72-hour one), while the accounts keep the
 * turns their claims gave them (docs/routing.md): one account's lines never pass another's.
 */
import { followAbort } from '../../providers/follow-abort.ts'

/** A batch line's place in a queue: its account, and its batch's deadline. */
export interface QueuePlace {
  account: string
  deadlineMs: number
}

export interface Waiter {
  (): void
  /** Null for a live call. */
  place: QueuePlace | null
}

/**
 * Queues a waiter and resolves when it is served, or rejects when `signal` aborts first.
 * `granted` runs the moment it is served, inside the call that served it (see ProviderGate);
 * `place` says where it waits (above; none: a live call's).
 */
export function waitInQueue(
  waiters: Waiter[],
  signal: AbortSignal | undefined,
  kick: () => void,
  { granted, place = null }: { granted?: () => void; place?: QueuePlace | null } = {},
): Promise<void> {
  if (signal?.aborted) return Promise.reject(signal.reason)
  return new Promise<void>((resolve, reject) => {
    const waiter: Waiter = Object.assign(
      () => {
        unfollow?.()
        granted?.()
        resolve()
      },
      { place },
    )
    const unfollow = signal
      ? followAbort(signal, () => {
          const index = waiters.indexOf(waiter)
          if (index !== -1) waiters.splice(index, 1)
          reject(signal.reason)
        })
      : null
    enqueue(waiters, waiter)
    kick()
  })
}

function enqueue(waiters: Waiter[], waiter: Waiter): void {
  const { place } = waiter
  if (place === null) {
    let at = 0
    while (at < waiters.length && waiters[at].place === null) at++
    waiters.splice(at, 0, waiter)
    return
  }
  waiters.push(waiter)
  // Its account's waiters, in their positions: the one just added moves ahead of those due later.
  let at = waiters.length - 1
  for (let i = at - 1; i >= 0; i--) {
    const other = waiters[i].place
    if (other === null || other.account !== place.account) continue
    if (other.deadlineMs <= place.deadlineMs) break
    waiters[at] = waiters[i]
    at = i
  }
  waiters[at] = waiter
}
