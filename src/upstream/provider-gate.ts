/**
 * Bounds how many requests are in flight to one provider and holds them back while the provider
 * has asked us to slow down (a 429), so a throttled provider is paced instead of hammered.
 */
import { createSlotQueue } from './slot-queue.ts'
import type { QueuePlace } from './wait-queue.ts'

/** A provider's concurrency bound: this in-process gate, or the fleet-wide one (fleet-gate.ts). */
export interface ProviderGate {
  /**
   * Resolves once a slot is taken; rejects when `signal` aborts first. `granted` runs the moment
   * it is taken, inside the call that freed it (release(), often from a connection finishing an
   * answer): a request started there can take that connection at once rather than a turn of the
   * event loop later. It must not throw. `place`: a batch line's, where it waits (wait-queue.ts).
   */
  acquire(signal?: AbortSignal, granted?: () => void, place?: QueuePlace): Promise<void>
  release(): void
  /** After a 429: nothing new is sent before `untilMs`. */
  pause(untilMs: number): void
  readonly inFlight: number
  readonly limit: number
}

/** One instance's bound on one provider (no Redis). */
export function createProviderGate(limit: number, now: () => number = Date.now): ProviderGate {
  const queue = createSlotQueue({ capacity: () => limit, now })
  return {
    get inFlight() {
      return queue.inFlight
    },
    limit,
    acquire: (signal, granted, place) => queue.take(signal, granted, place),
    release: () => queue.give(),
    pause: (untilMs) => queue.pause(untilMs),
  }
}
