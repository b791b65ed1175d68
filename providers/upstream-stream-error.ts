import { upstreamError } from './classify-error.ts'
import type { UpstreamError } from './types.ts'

/**
 * Thrown while iterating a stream's chunks when the upstream fails after answering 2xx
 * (connection lost, timeout, an event that is not JSON). Failures before that are values
 * (StreamOutcome with ok: false); after it the caller may already be answering its own client,
 * so the iterator throws this and `usage` resolves to null.
 */
export class UpstreamStreamError extends Error {
  constructor(readonly error: UpstreamError) {
    super(error.message)
    this.name = 'UpstreamStreamError'
  }
}

/**
 * A stream that closed before the event its API ends with (`marker`): cut off, not over. Told
 * as a break, so the client hears the answer is incomplete rather than a clean end.
 */
export const cutOff = (marker: string) =>
  new UpstreamStreamError(
    upstreamError('server_error', `the upstream stream closed before ${marker}: it was cut off`),
  )
