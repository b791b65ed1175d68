/**
 * Which runnable batches the batch lane serves now (docs/batch-lanes.md), for the live dispatcher to leave
 * alone: a batch whose first pending line's model has an open batch lane first in the planner's
 * order, until deadline − max(min_hours_left, fallback_hours), when the lane stops taking its
 * lines and what is left runs live. Decided from the store and the catalog only, so every
 * instance of a fleet decides the same; each batch is looked up once and remembered.
 */
import type { Catalog } from '../../catalog/catalog.ts'
import type { Store, RunnableBatch } from '../../store/store.ts'
import { chooseBatchLane, laneTakes } from './choose-batch-lane.ts'

export interface LaneBatches {
  /** The batches of `batches` the live dispatcher may claim from now. */
  liveOnly(batches: readonly RunnableBatch[], nowMs: number): Promise<RunnableBatch[]>
}

type Parsed = { url: string; body: { model?: unknown; provider?: unknown } }

export function createLaneBatches(
  store: Pick<Store, 'readLines'>,
  catalog: Pick<Catalog, 'find' | 'routeWithLanes' | 'provider'>,
  hasClient: (provider: string) => boolean,
): LaneBatches {
  /** Batch id → until when (ms) the lane serves it; 0: never. */
  const laneUntil = new Map<string, number>()

  async function decide(batch: RunnableBatch, nowMs: number): Promise<number> {
    const [line] = await store.readLines(batch.id, {
      afterLineNo: 0,
      limit: 1,
      statuses: ['pending'],
    })
    if (!line) return 0
    const parsed = JSON.parse(line.input) as Parsed
    if (!laneTakes(parsed.url)) return 0
    const model = catalog.find(String(parsed.body.model))
    if (!model) return 0
    const ordered = catalog.routeWithLanes(model, parsed.body.provider as never)
    const deadlineMs = batch.deadlineAt * 1000
    const choice = chooseBatchLane(
      ordered,
      deadlineMs,
      nowMs,
      (name) => catalog.provider(name)?.kind,
    )
    if (!choice || !hasClient(choice.offering.provider)) return 0
    return deadlineMs - Math.max(choice.settings.minLeftMs, choice.settings.fallbackMs)
  }

  return {
    async liveOnly(batches, nowMs) {
      if (laneUntil.size > 10_000) laneUntil.clear()
      const live: RunnableBatch[] = []
      for (const batch of batches) {
        let until = laneUntil.get(batch.id)
        if (until === undefined) laneUntil.set(batch.id, (until = await decide(batch, nowMs)))
        if (nowMs >= until) live.push(batch)
      }
      return live
    },
  }
}
