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
      let started = false
      const proceed = () => {
        if (options.proceed && !options.proceed()) return false
        if (!planner.available(provider, now())) return false
        started = true
        planner.started(batchId, provider, now())
        return true
      }
      planner.enter(batchId, provider)
      const startedAt = now()
      let outcome: Awaited<ReturnType<Upstreams['send']>> = null
      try {
        outcome = await upstreams.send({ ...options, proceed })
        return outcome
      } finally {
        // A call that threw still leaves service, as a failure.
        if (started)
          planner.ended(
            batchId,
            provider,
            now(),
            outcome?.latencyMs ?? now() - startedAt,
            outcome?.ok ?? false,
          )
        planner.leave(batchId, provider)
      }
    },
  }
}
