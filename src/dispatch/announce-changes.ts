/**
 * The dispatcher's store, telling of the batches each call changed (claims move counts, outcomes
 * move counts and cost, maintenance moves statuses, the waiting reporter says why one waits), so
 * progress streams on every instance re-read them at once. Calls that do not say which batches
 * they touched (lease reaping, the hand-back at shutdown) are left to the streams' slow poll, and
 * the planner's ETA is not one of the changes a stream reports (docs/events-and-webhooks.md). Every argument is
 * passed on as it came (rest parameters), so a parameter the store gains is never dropped here.
 */
import type { DispatchStore } from '../store/store.ts'

export function announceChanges(
  store: DispatchStore,
  changed: (batchIds: Iterable<string>) => void,
): DispatchStore {
  return {
    runnableBatches: (...args) => store.runnableBatches(...args),
    queuedLines: (...args) => store.queuedLines(...args),
    async claimLines(claim) {
      const lines = await store.claimLines(claim)
      if (lines.length > 0) changed([claim.batchId])
      return lines
    },
    nextLine: (...args) => store.nextLine(...args),
    leaveLane: (...args) => store.leaveLane(...args),
    laneLinesPending: (...args) => store.laneLinesPending(...args),
    batchStatuses: (...args) => store.batchStatuses(...args),
    renewLeases: (...args) => store.renewLeases(...args),
    async recordOutcomes(...args) {
      const answer = await store.recordOutcomes(...args)
      if (answer.recorded > 0) changed(new Set(args[1].map((outcome) => outcome.batchId)))
      return answer
    },
    releaseLeases: (...args) => store.releaseLeases(...args),
    reapExpiredLeases: (...args) => store.reapExpiredLeases(...args),
    async advanceBatches(...args) {
      const advanced = await store.advanceBatches(...args)
      const moved = [...advanced.changed, ...(advanced.waited ?? [])]
      if (moved.length > 0) changed(new Set(moved))
      return advanced
    },
    async setWaiting(...args) {
      const set = await store.setWaiting(...args)
      if (set) changed([args[0]])
      return set
    },
    recordEtas: (...args) => store.recordEtas(...args),
  }
}
