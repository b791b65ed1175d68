/**
 * The gate of a provider with adaptive concurrency (docs/routing.md): in front of its usual gate (the
 * in-process one, or the fleet-wide one on Redis, both bounded by `max_concurrency`), a local
 * queue that lets through no more than the provider's working limit — the sum of its replicas'
 * working points, which the replica pool finds (providers/adaptive-limit.ts). A call takes a
 * local slot, then a slot of the usual gate, and gives both back.
 *
 * With Redis the working points stay per instance: each instance measures the replicas it calls,
 * and what they show (latency, queue length, 503s) already includes every instance's load, so
 * the instances back off together the way TCP flows share a link; `max_concurrency` stays the
 * fleet-wide ceiling in Redis.
 */
import type { ProviderGate } from './provider-gate.ts'
import { createSlotQueue } from './slot-queue.ts'

export interface AdaptiveGate extends ProviderGate {
  /** The working limit may have grown: serve the waiters it now allows. */
  serve(): void
}

export function createAdaptiveGate(base: ProviderGate, workingLimit: () => number): AdaptiveGate {
  const local = createSlotQueue({ capacity: () => Math.min(base.limit, workingLimit()) })
  return {
    get inFlight() {
      return local.inFlight
    },
    limit: base.limit,
    async acquire(signal, granted, place) {
      await local.take(signal, undefined, place)
      try {
        await base.acquire(signal, granted, place)
      } catch (error) {
        local.give()
        throw error
      }
    },
    release() {
      base.release()
      local.give()
    },
    pause: (untilMs) => base.pause(untilMs),
    serve: () => local.serve(),
  }
}
