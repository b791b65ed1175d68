/**
 * Bounds how many requests are in flight to one provider and holds them back while the provider
 * has asked us to slow down (a 429), so a throttled provider is paced instead of hammered.
 */
import { waitInQueue, type Waiter } from './wait-queue.ts'
export interface ProviderGate {
  acquire(signal?: AbortSignal): Promise<void>
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
    acquire(signal) {
      if (inFlight < limit && now() >= pausedUntil && waiters.length === 0) {
        inFlight++
        return Promise.resolve()
      }
      return waitInQueue(waiters, signal, () => {
        if (!timer) wake()
      })
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
