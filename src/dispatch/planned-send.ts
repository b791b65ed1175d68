/**
 * Upstreams' `send` for batch lines, with the planner told of each call: the line is held by
 * the provider from the moment it is handed over (waiting for a slot counts), it starts when the
 * slot is granted, and its service time and success feed the provider's measured rate for its
 * batch. A provider that became unavailable while the line waited for its slot is not called:
 * send resolves null and the line goes back unsent.
 */
import type { SendOptions, Upstreams } from '../upstream/upstreams.ts'
import type { SpillPlanner } from './spill-planner.ts'

export function plannedSend(
  upstreams: Pick<Upstreams, 'send'>,
  planner: SpillPlanner,
  now: () => number = Date.now,
): Pick<Upstreams, 'send'> {
  return {
    async send(options: SendOptions) {
      const batchId = options.line?.batchId
      if (batchId === undefined) return upstreams.send(options)
      const provider = options.offering.provider
      // From the slot's grant to the end of the call: how long a line holds the slot, which is
      // what bounds the provider's rate (the upstream's own latency leaves out the gateway's part,
      // and a rate read from it came out 5% high against the simulator at 100 ms).
      let startedAt: number | null = null
      const proceed = () => {
        if (options.proceed && !options.proceed()) return false
        if (!planner.available(provider, now())) return false
        // Asked again for each resend of a call its provider answered busy: one start per call,
        // its service time from the first (the waits on a busy provider are part of its rate).
        if (startedAt === null) {
          startedAt = now()
          planner.started(batchId, provider, startedAt)
        }
        return true
      }
      planner.enter(batchId, provider)
      let ok = false
      try {
        const outcome = await upstreams.send({ ...options, proceed })
        ok = outcome?.ok ?? false
        return outcome
      } finally {
        // A call that threw still leaves service, as a failure.
        if (startedAt !== null) {
          const end = now()
          planner.ended(batchId, provider, end, end - startedAt, ok)
        }
        planner.leave(batchId, provider)
      }
    },
  }
}
