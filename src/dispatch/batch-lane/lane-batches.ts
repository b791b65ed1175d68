/**
 * What the live dispatcher may claim of the runnable batches while batch lanes run
 * (docs/batch-lanes.md). A line marked for a batch lane (NewLine.laneModel) is the lane engine's
 * while its lane is open (openLaneModels): until deadline − max(min_hours_left, fallback_hours),
 * when the lane stops taking lines and what is left runs live. So the live dispatcher claims a
 * batch's other lines and leaves those (RunnableBatch.leaveToLanes), and leaves alone a batch whose
 * first due line is the lane's: its lines are mostly the lane's, and a claim would walk past them
 * all. That batch is looked at again every LOOK_AGAIN_MS, so its other lines run once the lane has
 * taken its own. Decided from the store and the catalog only, so every instance decides the same.
 */
import type { Catalog } from '../../catalog/catalog.ts'
import type { DispatchStore, RunnableBatch } from '../../store/store.ts'
import { laneForLine, openLaneModels } from './choose-batch-lane.ts'

export interface LaneBatches {
  /** The batches of `batches` the live dispatcher may claim from now, each with what it leaves. */
  liveOnly(batches: readonly RunnableBatch[], nowMs: number): Promise<RunnableBatch[]>
}

/** How often a batch's first due line is looked at again (one read). */
const LOOK_AGAIN_MS = 5_000

export function createLaneBatches(
  dispatch: Pick<DispatchStore, 'nextLine' | 'laneLinesPending'>,
  catalog: Pick<Catalog, 'models' | 'find' | 'routeWithLanes' | 'provider'>,
  hasClient: (provider: string) => boolean,
): LaneBatches {
  /**
   * Batch id → whether its first due line was the lane's, how many of its pending lines the
   * lanes hold (left out of what the live dispatcher counts on), and when that was looked at.
   */
  const looked = new Map<string, { lanes: boolean; marked: number; at: number }>()

  async function look(batch: RunnableBatch, open: readonly string[], nowMs: number) {
    const lanes = await firstIsLanes(batch, open, nowMs)
    const marked = lanes ? 0 : await dispatch.laneLinesPending(batch.id, open)
    return { lanes, marked, at: nowMs }
  }

  /** Whether the batch's first due line is one the lane engine takes now. */
  async function firstIsLanes(batch: RunnableBatch, open: readonly string[], nowMs: number) {
    const first = await dispatch.nextLine(batch.id, nowMs)
    if (first === null || first.laneModel === null || !open.includes(first.laneModel)) return false
    const deadlineMs = batch.deadlineAt * 1000
    return laneForLine(catalog, first.input, { deadlineMs, nowMs, hasClient }) !== null
  }

  return {
    async liveOnly(batches, nowMs) {
      if (looked.size > 10_000) looked.clear()
      const live: RunnableBatch[] = []
      for (const batch of batches) {
        const open = openLaneModels(catalog, {
          deadlineMs: batch.deadlineAt * 1000,
          nowMs,
          hasClient,
        })
        if (open.length === 0) {
          live.push(batch)
          continue
        }
        let seen = looked.get(batch.id)
        if (seen === undefined || nowMs - seen.at >= LOOK_AGAIN_MS)
          looked.set(batch.id, (seen = await look(batch, open, nowMs)))
        if (seen.lanes) continue
        // Its pending lines the lanes hold are not the live lanes' to plan for or share out (as
        // counted at the last look: the lanes take theirs meanwhile, so never below one).
        const pending = Math.max(1, batch.pending - seen.marked)
        live.push({ ...batch, pending, leaveToLanes: open })
      }
      return live
    },
  }
}
