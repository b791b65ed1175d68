/**
 * One 'abort' listener per signal, however many waiters share it (the dispatcher's shutdown
 * signal is shared by every line in flight or waiting for a slot): removing one listener of
 * hundreds from an AbortSignal walks the whole list, and that on every call.
 */
const followers = new WeakMap<AbortSignal, Set<() => void>>()

/** Runs `onAbort` once if `signal` aborts; the function returned stops following, in O(1). */
export function followAbort(signal: AbortSignal, onAbort: () => void): () => void {
  let calls = followers.get(signal)
  if (!calls) {
    const set = new Set<() => void>()
    signal.addEventListener(
      'abort',
      () => {
        for (const call of set) call()
        set.clear()
      },
      { once: true },
    )
    followers.set(signal, set)
    calls = set
  }
  calls.add(onAbort)
  const set = calls
  return () => set.delete(onAbort)
}
