/**
 * The dispatcher's store, telling of the batches each call changed (claims move counts, outcomes
 * move counts and cost, maintenance moves statuses, the waiting reporter says why one waits), so progress streams on every instance
 * re-read them at once. Calls that do not say which batches they touched (lease reaping, the
 * hand-back at shutdown) are left to the streams' slow poll.
 */
import type { DispatchStore } from '../store/store.ts'

export function announceChanges(
  store: DispatchStore,
  changed: (batchIds: Iterable<string>) => void,
): DispatchStore {
  return {
    runnableBatches: (nowMs, limit) => store.runnableBatches(nowMs, limit),
    async claimLines(batchId, owner, limit, nowMs, leaseUntilMs) {
      const lines = await store.claimLines(batchId, owner, limit, nowMs, leaseUntilMs)
      if (lines.length > 0) changed([batchId])
      return lines
    },
    batchStatuses: (ids) => store.batchStatuses(ids),
    renewLeases: (owner, leaseUntilMs) => store.renewLeases(owner, leaseUntilMs),
    async recordOutcomes(owner, outcomes, nowMs) {
      const recorded = await store.recordOutcomes(owner, outcomes, nowMs)
      if (recorded > 0) changed(new Set(outcomes.map((outcome) => outcome.batchId)))
      return recorded
    },
    releaseLeases: (owner) => store.releaseLeases(owner),
    reapExpiredLeases: (nowMs) => store.reapExpiredLeases(nowMs),
    async advanceBatches(nowSeconds) {
      const ids = await store.advanceBatches(nowSeconds)
      if (ids.length > 0) changed(ids)
      return ids
    },
    // The planner's ETA is not one of the changes a stream reports (SPEC §15).
    recordEtas: (etas) => store.recordEtas(etas),
    async setWaiting(batchId, waiting, replaces) {
      const set = await store.setWaiting(batchId, waiting, replaces)
      if (set) changed([batchId])
      return set
    },
  }
}
