/**
 * Provider batches of one Multigrid batch that a lane failed as a whole in a row (an OpenAI batch
 * `failed`, e.g. `token_limit_exceeded`, or an upload or create refused): their lines wait longer
 * each time before the lane gets them again (docs/batch-lanes.md), instead of a new upload every
 * `poll_s`. Kept by the instance that saw the failures: the wait is on the lines, so every
 * instance keeps it.
 */

/** Batches remembered at most; the oldest are forgotten first. */
const MAX_REMEMBERED = 10_000

export interface LaneFailures {
  /** A chunk of the batch on the offering failed whole: the failures in a row, this one counted. */
  failed(batchId: string, offering: string): number
  /** A chunk of the batch on the offering ended upstream: the lane works for it again. */
  worked(batchId: string, offering: string): void
}

export function createLaneFailures(): LaneFailures {
  const inARow = new Map<string, number>()
  const key = (batchId: string, offering: string) => `${batchId} ${offering}`
  return {
    failed(batchId, offering) {
      const k = key(batchId, offering)
      const count = (inARow.get(k) ?? 0) + 1
      inARow.delete(k)
      if (inARow.size >= MAX_REMEMBERED) inARow.delete(inARow.keys().next().value!)
      inARow.set(k, count)
      return count
    },
    worked(batchId, offering) {
      inARow.delete(key(batchId, offering))
    },
  }
}
