/**
 * One request over the offerings it may go to, in order (the catalog's routing decided the list
 * and whether it may fall back at all): the first answer wins; a failure moves on to the next
 * offering unless it is one the next would give too. Used by batch lines (src/dispatch/run-line.ts)
 * and live calls, plain and streamed (src/http/live.ts).
 */
import type { Offering } from '../catalog/catalog-file.ts'
import type { Outcome, StreamOutcome, UpstreamError } from '../../providers/types.ts'
import type { SendOptions, Upstreams } from './upstreams.ts'

/**
 * A request the upstream refused as wrong would be refused by the next offering too; a refused
 * credential is that provider's alone, so the next may serve it.
 */
export function fallsBack(error: UpstreamError): boolean {
  return error.retryable || error.kind === 'auth'
}

/** What the last offering tried did: the answer, or the failure that ended the trying. */
export interface Tried<O> {
  outcome: O
  offering: Offering
}

/**
 * Tries `offerings` in order; null when no call was made (SendOptions.proceed said no). One that
 * fell back from a call made and then could not go on (the next offering paused, down, or the
 * batch stopped) ends with that call's failure: it was an attempt, retried with its backoff, not
 * a line handed back unsent as if nothing had gone out. Busy answers are not attempts.
 */
async function tryInOrder<O extends { ok: boolean; error?: UpstreamError }>(
  offerings: readonly Offering[],
  attempt: (offering: Offering) => Promise<O | null>,
): Promise<Tried<O> | null> {
  let last: Tried<O> | null = null
  for (const offering of offerings) {
    const outcome = await attempt(offering)
    if (outcome === null) return last?.outcome.error?.kind === 'busy' ? null : last
    last = { outcome, offering }
    if (outcome.ok || !fallsBack(outcome.error!)) break
  }
  if (!last) throw new Error('no offering to send to')
  return last
}

export type FallbackOptions = Omit<SendOptions, 'offering'> & { offerings: readonly Offering[] }

/**
 * How long a batch line waits on a busy offering (every replica answered 503, a full queue)
 * before it falls back to the next one; on its last offering it waits until its batch's deadline
 * or cancel (docs/routing.md: busy is not an attempt).
 */
export const BUSY_PATIENCE_MS = 30_000

/** A whole answer from the first offering that gives one. */
export function sendWithFallback(
  upstreams: Pick<Upstreams, 'send'>,
  options: FallbackOptions,
): Promise<Tried<Outcome> | null> {
  const { offerings, ...rest } = options
  // Live calls (no line) fall back at once: someone is waiting on the answer.
  if (!rest.line) return tryInOrder(offerings, (offering) => upstreams.send({ ...rest, offering }))
  const last = offerings[offerings.length - 1]
  return tryInOrder(offerings, (offering) =>
    upstreams.send({
      ...rest,
      offering,
      busyPatienceMs: offering === last ? Number.POSITIVE_INFINITY : BUSY_PATIENCE_MS,
    }),
  )
}

/** A stream from the first offering that opens one; `done` gives its slot back when it is over. */
export async function streamWithFallback(
  upstreams: Upstreams,
  options: Omit<FallbackOptions, 'proceed' | 'line'>,
): Promise<Tried<StreamOutcome> & { done: () => void }> {
  const { offerings, ...rest } = options
  let done = () => {}
  const tried = await tryInOrder(offerings, async (offering) => {
    const opened = await upstreams.stream({ ...rest, offering })
    done = opened.done
    return opened.outcome
  })
  return { ...tried!, done }
}
