/**
 * What the live dispatcher may claim of the runnable batches while batch lanes run
 * (docs/batch-lanes.md). A line marked for a batch lane (NewLine.batchLane) is the lane engine's
 * while its lane is open (openBatchLanes): until deadline − max(min_hours_left, fallback_hours),
 * when the lane stops taking lines and what is left runs live. So the live dispatcher claims a
 * batch's other lines and leaves those (RunnableBatch.leaveToLanes), and leaves alone a batch whose
 * first due line is the lane's: its lines are mostly the lane's, and a claim would walk past them
 * all. That batch is looked at again every LOOK_AGAIN_MS, so its other lines run once the lane has
 * taken its own. Decided from the store and the catalog only, so every instance decides the same.
 */
import type { Catalog } from '../../catalog/catalog.ts'
import type { DispatchStore, RunnableBatch } from '../../store/store.ts'
import { openBatchLanes } from './choose-batch-lane.ts'

export interface LaneBatches {
  /** The batches of `batches` the live dispatcher may claim from now, each with what it leaves. */
  liveOnly(batches: readonly RunnableBatch[], nowMs: number): Promise<RunnableBatch[]>
}

/** How often a batch's first due line is looked at again (one read). */
const LOOK_AGAIN_MS = 5_000

export function createLaneBatches(
  dispatch: Pick<DispatchStore, 'nextLine' | 'laneLinesPending'>,
  catalog: Pick<Catalog, 'models' | 'provider'>,
  hasClient: (provider: string) => boolean,
): LaneBatches {
  /**
   * Batch id → whether its first due line was an open lane's, how many of its pending lines were
   * then the live lanes' (not marked for an open lane), and when that was looked at.
   */
  const looked = new Map<string, { lanes: boolean; live: number; at: number }>()

  async function look(batch: RunnableBatch, open: readonly string[], nowMs: number) {
    const first = await dispatch.nextLine(batch.id, nowMs)
    const lanes = first?.batchLane != null && open.includes(first.batchLane)
    const live = lanes ? 0 : batch.pending - (await dispatch.laneLinesPending(batch.id, open))
    return { lanes, live, at: nowMs }
  }

  return {
    async liveOnly(batches, nowMs) {
      if (looked.size > 10_000) looked.clear()
      const live: RunnableBatch[] = []
      for (const batch of batches) {
        // A batch without marked lines is all the live lanes': nothing to look up or leave.
        const open = batch.laneLines
          ? openBatchLanes(catalog, { deadlineMs: batch.deadlineAt * 1000, nowMs, hasClient })
          : []
        if (open.length === 0) {
          live.push(batch)
          continue
        }
        let seen = looked.get(batch.id)
        if (seen === undefined || nowMs - seen.at >= LOOK_AGAIN_MS)
          looked.set(batch.id, (seen = await look(batch, open, nowMs)))
        if (seen.lanes || seen.live <= 0) continue
        // Its lines the lanes hold are not the live lanes' to plan for or share out. The lanes take
        // theirs meanwhile, so the live lanes' part is at most what it was at the look.
        const pending = Math.max(1, Math.min(batch.pending, seen.live))
        live.push({ ...batch, pending, leaveToLanes: open })
      }
      return live
    },
  }
}
