/**
 * Upstreams' `send` for batch lines, with the planner and the dispatcher's observer told of each
 * call. For the planner, the line is held by the provider from the moment it is handed over
 * (waiting for a slot counts), it starts when the slot is granted, and its service time and
 * success feed the provider's measured rate for its batch. The observer learns when a call really
 * started and how it ended: routing.providers counts the calls in flight from it, and `waiting`
 * learns of 429s and providers that are down. A provider that became unavailable while the line
 * waited for its slot is not called: send resolves null and the line goes back unsent.
 *
 * One wrapper for both, not one each: a wrapper is an async frame, a copy of the options and a
 * closure on every line (bench:dispatch). Live calls do not come through here.
 */
import type { Outcome, UpstreamError } from '../../providers/types.ts'
import type { LineCall, SendOptions, Upstreams } from '../upstream/upstreams.ts'
import type { SpillPlanner } from './spill-planner.ts'

export interface CallObserver {
  /** The call started: its slot was taken and the line still went. */
  started(line: LineCall, provider: string): void
  /** `outcome` is null when the call threw (a bug, or the shutdown's abort). */
  ended(line: LineCall, provider: string, outcome: Outcome | null): void
  /** The provider answered busy (a full pool, flex out of capacity): sent again at `retryAtMs`. */
  busy(line: LineCall, provider: string, error: UpstreamError, retryAtMs: number): void
}

export function plannedSend(
  upstreams: Pick<Upstreams, 'send'>,
  planner: SpillPlanner,
  observer: CallObserver,
  now: () => number = Date.now,
): Pick<Upstreams, 'send'> {
  const onBusy: SendOptions['onBusy'] = (sent, error, retryAtMs) =>
    observer.busy(sent.line!, sent.offering.provider, error, retryAtMs)
  return {
    async send(options: SendOptions) {
      const line = options.line
      if (line === undefined) return upstreams.send(options)
      const { batchId } = line
      const provider = options.offering.provider
      // From the slot's grant to the end of the call: how long a line holds the slot, which is
      // what bounds the provider's rate (the upstream's own latency leaves out the gateway's part,
      // and a rate read from it came out 5% high against the simulator at 100 ms).
      let startedAt: number | null = null
      const proceed = () => {
        if (options.proceed && !options.proceed()) return false
        const at = now()
        if (!planner.available(provider, at)) return false
        // Asked again for each resend of a call its provider answered busy: one start per call,
        // its service time from the first (the waits on a busy provider are part of its rate).
        if (startedAt === null) {
          startedAt = at
          planner.started(batchId, provider, at)
          observer.started(line, provider)
        }
        return true
      }
      planner.enter(batchId, provider)
      let outcome: Outcome | null = null
      try {
        outcome = await upstreams.send({ ...options, proceed, onBusy })
        return outcome
      } finally {
        // A call that threw still leaves service, as a failure.
        if (startedAt !== null) {
          observer.ended(line, provider, outcome)
          const end = now()
          planner.ended(batchId, provider, {
            nowMs: end,
            serviceMs: end - startedAt,
            ok: outcome?.ok ?? false,
          })
        }
        planner.leave(batchId, provider)
      }
    },
  }
}
