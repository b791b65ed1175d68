/**
 * Which runnable batches the batch lane serves now (docs/batch-lanes.md), for the live dispatcher to leave
 * alone: a batch whose first pending line's model has an open batch lane first in the planner's
 * order, until deadline − max(min_hours_left, fallback_hours), when the lane stops taking its
 * lines and what is left runs live. Decided from the store and the catalog only, so every
 * instance of a fleet decides the same; a batch the lane serves is looked at again every
 * LOOK_AGAIN_MS, so that lines of another model in it run live once the lane has taken its own.
 */
import type { Catalog } from '../../catalog/catalog.ts'
import type { Store, RunnableBatch } from '../../store/store.ts'
import { laneForLine } from './choose-batch-lane.ts'

export interface LaneBatches {
  /** The batches of `batches` the live dispatcher may claim from now. */
  liveOnly(batches: readonly RunnableBatch[], nowMs: number): Promise<RunnableBatch[]>
}

/** How often a batch the lane serves is looked at again (one read of its first pending line). */
const LOOK_AGAIN_MS = 5_000

export function createLaneBatches(
  store: Pick<Store, 'readLines'>,
  catalog: Pick<Catalog, 'find' | 'routeWithLanes' | 'provider'>,
  hasClient: (provider: string) => boolean,
): LaneBatches {
  /** Batch id → until when (ms) the lane serves it (0: never), and when that was decided. */
  const laneUntil = new Map<string, { until: number; at: number }>()

  async function decide(batch: RunnableBatch, nowMs: number): Promise<number> {
    const [line] = await store.readLines(batch.id, {
      afterLineNo: 0,
      limit: 1,
      statuses: ['pending'],
    })
    if (!line) return 0
    const deadlineMs = batch.deadlineAt * 1000
    const choice = laneForLine(catalog, line.input, { deadlineMs, nowMs, hasClient })
    if (!choice) return 0
    return deadlineMs - Math.max(choice.settings.minLeftMs, choice.settings.fallbackMs)
  }

  return {
    async liveOnly(batches, nowMs) {
      if (laneUntil.size > 10_000) laneUntil.clear()
      const live: RunnableBatch[] = []
      for (const batch of batches) {
        let decided = laneUntil.get(batch.id)
        // Looked at again while the lane serves it: once its lane lines are all in provider
        // batches, its first pending line is of another model, and the rest runs live now.
        if (decided === undefined || (nowMs < decided.until && nowMs - decided.at >= LOOK_AGAIN_MS))
          laneUntil.set(batch.id, (decided = { until: await decide(batch, nowMs), at: nowMs }))
        if (nowMs >= decided.until) live.push(batch)
      }
      return live
    },
  }
}
