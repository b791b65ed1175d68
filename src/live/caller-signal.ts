/**
 * A whole live call's caller hanging up, as a signal that ends its wait for a provider's slot.
 * Bun makes a request's AbortSignal on its first access, at about 6 µs a request (a Bun.serve
 * answering at once: 44,650 against 60,557 requests/s when the handler reads `request.signal`),
 * and a live call most often finds a slot free. So the request's signal is read only when
 * something waits on it: the queue (wait-queue.ts) and a busy backoff, which ask for `aborted`
 * and `reason` and listen for 'abort', and nothing else.
 */
type Waitable = Pick<AbortSignal, 'aborted' | 'reason' | 'addEventListener' | 'removeEventListener'>

class CallerSignal implements Waitable {
  constructor(private readonly request: Request) {}
  get aborted(): boolean {
    return this.request.signal.aborted
  }
  get reason(): unknown {
    return this.request.signal.reason
  }
  addEventListener(...args: Parameters<AbortSignal['addEventListener']>): void {
    this.request.signal.addEventListener(...args)
  }
  removeEventListener(...args: Parameters<AbortSignal['removeEventListener']>): void {
    this.request.signal.removeEventListener(...args)
  }
}

export const callerSignal = (request: Request): AbortSignal =>
  new CallerSignal(request) as Waitable as AbortSignal
