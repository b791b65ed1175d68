/**
 * Bounds how many requests are in flight to one provider and holds them back while the provider
 * has asked us to slow down (a 429), so a throttled provider is paced instead of hammered.
 */
import { waitInQueue, type Waiter } from './wait-queue.ts'
export interface ProviderGate {
  /**
   * Resolves once a slot is taken. `granted` runs the moment it is taken, inside the call that
   * freed it (release(), often from a connection finishing an answer): a request started there
   * can take that connection at once rather than a turn of the event loop later. It must not
   * throw.
   */
  acquire(signal?: AbortSignal, granted?: () => void): Promise<void>
  release(): void
  /** After a 429: nothing new is sent before `untilMs`. */
  pause(untilMs: number): void
  readonly inFlight: number
  readonly limit: number
}

export function createProviderGate(limit: number, now: () => number = Date.now): ProviderGate {
  let inFlight = 0
  let pausedUntil = 0
  const waiters: Waiter[] = []
  let timer: ReturnType<typeof setTimeout> | null = null

  const wake = () => {
    timer = null
    const wait = pausedUntil - now()
    if (wait > 0) {
      timer = setTimeout(wake, wait)
      return
    }
    while (inFlight < limit && waiters.length > 0) {
      inFlight++
      waiters.shift()!()
    }
  }

  return {
    get inFlight() {
      return inFlight
    },
    limit,
    acquire(signal, granted) {
      if (inFlight < limit && now() >= pausedUntil && waiters.length === 0) {
        inFlight++
        granted?.()
        return Promise.resolve()
      }
      return waitInQueue(waiters, signal, () => {
        if (!timer) wake()
      }, granted)
    },
    release() {
      inFlight--
      if (!timer) wake()
    },
    pause(untilMs) {
      if (untilMs <= pausedUntil) return
      pausedUntil = untilMs
      if (timer) clearTimeout(timer)
      timer = setTimeout(wake, Math.max(0, untilMs - now()))
    },
  }
}
