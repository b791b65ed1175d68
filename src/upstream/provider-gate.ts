/**
 * Bounds how many requests are in flight to one provider and holds them back while the provider
 * has asked us to slow down (a 429), so a throttled provider is paced instead of hammered.
 */
import { createSlotQueue } from './slot-queue.ts'

/** A provider's concurrency bound: this in-process gate, or the fleet-wide one (fleet-gate.ts). */
export interface ProviderGate {
  /**
   * Resolves once a slot is taken; rejects when `signal` aborts first. `granted` runs the moment
   * it is taken, inside the call that freed it (release(), often from a connection finishing an
   * answer): a request started there can take that connection at once rather than a turn of the
   * event loop later. It must not throw. `rank`: waiters are served lowest first (wait-queue.ts).
   */
  acquire(signal?: AbortSignal, granted?: () => void, rank?: number): Promise<void>
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
    acquire: (signal, granted, rank) => queue.take(signal, granted, rank),
    release: () => queue.give(),
    pause: (untilMs) => queue.pause(untilMs),
  }
}
