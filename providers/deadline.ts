/**
 * One deadline per upstream call that fires on the provider timeout or on the caller's own
 * signal, and remembers which. The timer is cleared when the call ends: AbortSignal.timeout
 * cannot be, and at 6,000 calls/s with a 600 s timeout that would be millions of live timers.
 *
 * The HTTP client listens to the deadline itself (an AbortSource), not to an AbortSignal: an
 * AbortController made per call, and an 'abort' listener added to and removed from its signal,
 * cost more than the rest of the deadline together on the live path (bench:proxy's profile).
 * A real AbortSignal is made only for code that asks for `signal`.
 */
import { followAbort } from './follow-abort.ts'
import type { AbortSource } from './http-client.ts'

export interface Deadline extends AbortSource {
  /** The deadline as an AbortSignal, made on first use, for APIs that take nothing else. */
  readonly signal: AbortSignal
  readonly timedOut: boolean
  readonly callerAborted: boolean
  readonly timeoutMs: number
  /** What the timeout amounted to, once it fired (classify-error.ts words the failure with it). */
  readonly timeoutText?: string
  /** Runs `listener` once if the deadline fires before done(). */
  onAbort(listener: () => void): void
  /**
   * For a stream once its answer has begun: from now on the timeout counts from the last touch()
   * (a stream still sending is not late), within `totalMs` from now in all.
   */
  idleFromNow(totalMs: number): void
  /** Bytes arrived: an idle timeout starts over. */
  touch(): void
  /** Clears the timer and unhooks the caller's signal. Safe to call twice. */
  done(): void
}

export function createDeadline(timeoutMs: number, outer?: AbortSignal): Deadline {
  return new CallDeadline(timeoutMs, outer)
}

type Listener = EventListenerObject | (() => void)

class CallDeadline implements Deadline {
  aborted = false
  reason: unknown = undefined
  timedOut = false
  callerAborted = false
  private listeners: Listener[] = []
  timeoutText?: string
  private controller: AbortController | null = null
  private timer: ReturnType<typeof setTimeout>
  private total: ReturnType<typeof setTimeout> | null = null
  private idle = false
  private unfollow: (() => void) | null = null

  constructor(
    readonly timeoutMs: number,
    private readonly outer?: AbortSignal,
  ) {
    this.timer = setTimeout(timeUp, timeoutMs, this)
    if (outer?.aborted) this.outerAborted()
    else if (outer) this.unfollow = followAbort(outer, () => this.outerAborted())
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController()
      if (this.aborted) this.controller.abort(this.reason)
    }
    return this.controller.signal
  }

  outerAborted(): void {
    this.callerAborted = true
    this.abort(this.outer?.reason ?? new DOMException('the caller aborted', 'AbortError'))
  }

  timedOutNow(
    text = this.idle ? `the stream sent nothing for ${this.timeoutMs} ms` : undefined,
  ): void {
    if (this.aborted) return
    this.timedOut = true
    this.timeoutText = text
    this.abort(new DOMException(text ?? `no answer within ${this.timeoutMs} ms`, 'TimeoutError'))
  }

  idleFromNow(totalMs: number): void {
    if (this.aborted || this.idle) return
    this.idle = true
    this.timer.refresh()
    this.total = setTimeout(streamTooLong, totalMs, this, totalMs)
  }

  touch(): void {
    if (this.idle && !this.aborted) this.timer.refresh()
  }

  private abort(reason: unknown): void {
    if (this.aborted) return
    this.aborted = true
    this.reason = reason
    const listeners = this.listeners
    this.listeners = []
    for (const listener of listeners) {
      if (typeof listener === 'function') listener()
      else listener.handleEvent(new Event('abort'))
    }
    this.controller?.abort(reason)
  }

  addEventListener(_type: 'abort', listener: EventListenerObject): void {
    if (!this.aborted) this.listeners.push(listener)
  }

  removeEventListener(_type: 'abort', listener: EventListenerObject): void {
    const at = this.listeners.indexOf(listener)
    if (at >= 0) this.listeners.splice(at, 1)
  }

  onAbort(listener: () => void): void {
    if (this.aborted) listener()
    else this.listeners.push(listener)
  }

  done(): void {
    clearTimeout(this.timer)
    if (this.total) clearTimeout(this.total)
    this.unfollow?.()
  }
}

function timeUp(deadline: CallDeadline) {
  deadline.timedOutNow()
}

function streamTooLong(deadline: CallDeadline, totalMs: number) {
  deadline.timedOutNow(`the stream did not end within ${totalMs} ms`)
}
