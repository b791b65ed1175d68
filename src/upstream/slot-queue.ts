/**
 * The queue-and-serve both provider gates are made of (in-process and fleet-wide): slots handed
 * to waiters in the order wait-queue.ts keeps (live calls first, an account's lines by deadline), never more in flight than `capacity()`, nothing handed out
 * while the provider has asked for a pause (a 429). What differs between the gates is only where
 * the capacity comes from: a fixed limit, or the slots leased from the fleet's Redis semaphore.
 */
import { waitInQueue, type QueuePlace, type Waiter } from './wait-queue.ts'

export interface SlotQueue {
  /**
   * Resolves once a slot is taken; rejects when `signal` aborts first. `granted`, `place`: see
   * ProviderGate.acquire.
   */
  take(signal?: AbortSignal, granted?: () => void, place?: QueuePlace): Promise<void>
  /** A slot given back; the next waiter is served. */
  give(): void
  /** After a 429: nothing new is handed out before `untilMs`. A shorter pause never cuts a longer one. */
  pause(untilMs: number): void
  /** Serves the waiters the capacity allows now (call it when the capacity grew). */
  serve(): void
  /** Clears the pause timer (shutdown). */
  close(): void
  readonly inFlight: number
  readonly waiting: number
}

export interface SlotQueueOptions {
  /** How many may be in flight right now. */
  capacity(): number
  /** A slot was taken. */
  onTaken?(): void
  /** Waiters are left after serving: the capacity should grow if it can. */
  onShort?(): void
  now?: () => number
}

export function createSlotQueue(options: SlotQueueOptions): SlotQueue {
  const now = options.now ?? Date.now
  const waiters: Waiter[] = []
  let inFlight = 0
  let pausedUntil = 0
  let pauseTimer: ReturnType<typeof setTimeout> | null = null

  const afterPause = (ms: number) => {
    pauseTimer = setTimeout(() => {
      pauseTimer = null
      serve()
    }, ms)
  }

  function serve() {
    const wait = pausedUntil - now()
    if (wait > 0) {
      if (waiters.length > 0 && !pauseTimer) afterPause(wait)
      return
    }
    while (waiters.length > 0 && inFlight < options.capacity()) {
      inFlight++
      options.onTaken?.()
      waiters.shift()!()
    }
    if (waiters.length > 0) options.onShort?.()
  }

  return {
    get inFlight() {
      return inFlight
    },
    get waiting() {
      return waiters.length
    },
    take(signal, granted, place) {
      if (waiters.length === 0 && inFlight < options.capacity() && now() >= pausedUntil) {
        inFlight++
        options.onTaken?.()
        granted?.()
        return Promise.resolve()
      }
      return waitInQueue(waiters, signal, serve, { granted, place })
    },
    give() {
      inFlight--
      serve()
    },
    pause(untilMs) {
      if (untilMs <= pausedUntil) return
      pausedUntil = untilMs
      if (pauseTimer) clearTimeout(pauseTimer)
      afterPause(Math.max(0, untilMs - now()))
    },
    serve,
    close() {
      if (pauseTimer) clearTimeout(pauseTimer)
      pauseTimer = null
    },
  }
}
