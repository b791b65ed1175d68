/**
 * One AbortSignal per upstream call that fires on the provider timeout or on the caller's own
 * signal, and remembers which. The timer is cleared when the call ends: AbortSignal.timeout
 * cannot be, and at 6,000 calls/s with a 600 s timeout that would be millions of live timers.
 */
import { followAbort } from './follow-abort.ts'

export interface Deadline {
  readonly signal: AbortSignal
  readonly timedOut: boolean
  readonly callerAborted: boolean
  readonly timeoutMs: number
  /** Runs `listener` once if the deadline fires before done(). */
  onAbort(listener: () => void): void
  /** Clears the timer and unhooks the caller's signal. Safe to call twice. */
  done(): void
}

export function createDeadline(timeoutMs: number, outer?: AbortSignal): Deadline {
  const controller = new AbortController()
  let timedOut = false
  let callerAborted = false
  const onOuterAbort = () => {
    callerAborted = true
    controller.abort(outer?.reason)
  }
  const timer = setTimeout(() => {
    timedOut = true
    controller.abort(new DOMException(`no answer within ${timeoutMs} ms`, 'TimeoutError'))
  }, timeoutMs)
  let unfollow: (() => void) | null = null
  if (outer?.aborted) onOuterAbort()
  else if (outer) unfollow = followAbort(outer, onOuterAbort)

  return {
    signal: controller.signal,
    get timedOut() {
      return timedOut
    },
    get callerAborted() {
      return callerAborted
    },
    timeoutMs,
    onAbort(listener) {
      if (controller.signal.aborted) listener()
      else controller.signal.addEventListener('abort', listener, { once: true })
    },
    done() {
      clearTimeout(timer)
      unfollow?.()
    },
  }
}
