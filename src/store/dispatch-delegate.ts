/**
 * The dispatcher's calls of a store, passed on to what runs them: a dispatch thread of the store
 * (dispatch-thread.ts), or, for an in-memory SQLite store, the same connection. Both stores
 * extend it, so the Store interface stays one object for its callers.
 */
import type { DispatchStore, LineOutcome } from './store.ts'

export abstract class DispatchDelegate implements DispatchStore {
  protected abstract readonly dispatch: DispatchStore

  runnableBatches(nowMs: number, limit: number) {
    return this.dispatch.runnableBatches(nowMs, limit)
  }

  claimLines(batchId: string, owner: string, limit: number, nowMs: number, leaseUntilMs: number) {
    return this.dispatch.claimLines(batchId, owner, limit, nowMs, leaseUntilMs)
  }

  batchStatuses(ids: readonly string[]) {
    return this.dispatch.batchStatuses(ids)
  }

  renewLeases(owner: string, leaseUntilMs: number) {
    return this.dispatch.renewLeases(owner, leaseUntilMs)
  }

  recordOutcomes(owner: string, outcomes: readonly LineOutcome[], nowMs: number) {
    return this.dispatch.recordOutcomes(owner, outcomes, nowMs)
  }

  releaseLeases(owner: string) {
    return this.dispatch.releaseLeases(owner)
  }

  reapExpiredLeases(nowMs: number) {
    return this.dispatch.reapExpiredLeases(nowMs)
  }

  advanceBatches(nowSeconds: number) {
    return this.dispatch.advanceBatches(nowSeconds)
  }
}
