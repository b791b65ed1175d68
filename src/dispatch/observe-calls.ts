/**
 * The dispatcher's view of its upstream calls: Upstreams whose `send` tells, for a batch line,
 * when a call to a provider really started (its slot was taken and the line still went) and how
 * it ended. routing.providers counts the calls in flight from it, and `waiting` learns of 429s
 * and providers that are down. Live calls do not come through here.
 */
import type { Outcome } from '../../providers/types.ts'
import type { LineCall, Upstreams } from '../upstream/upstreams.ts'

export interface CallObserver {
  started(line: LineCall, provider: string): void
  /** `outcome` is null when the call threw (a bug, or the shutdown's abort). */
  ended(line: LineCall, provider: string, outcome: Outcome | null): void
}

export function observeCalls(upstreams: Upstreams, observer: CallObserver): Upstreams {
  return {
    ...upstreams,
    async send(options) {
      const { line, offering } = options
      if (!line) return upstreams.send(options)
      let started = false
      const proceed = () => {
        if (options.proceed && !options.proceed()) return false
        // Asked again for each resend of a call its provider answered busy: one start per call.
        if (!started) observer.started(line, offering.provider)
        started = true
        return true
      }
      let outcome: Outcome | null = null
      try {
        outcome = await upstreams.send({ ...options, proceed })
        return outcome
      } finally {
        if (started) observer.ended(line, offering.provider, outcome)
      }
    },
  }
}
