/**
 * The mark admission gives a batch line for a batch lane (NewLine.batchLane, docs/batch-lanes.md):
 * the lane its own planner order (its routing counts) puts first, named by laneKey, when the line
 * is in a form that lane takes — a Responses or Messages line with fields outside its chat
 * translation only where the lane's provider speaks that API. Whether the lane is still open is
 * decided when the line runs: the lane engine takes the marked lines of open lanes, and the live
 * lanes the rest, so a line whose lane closed runs live without its mark being touched.
 */
import type { PassThrough } from '../../providers/types.ts'
import type { Catalog } from './catalog.ts'
import { hasBatchLane, laneOf, type ModelEntry } from './catalog-file.ts'
import type { Routing } from '../schemas/requests.ts'
import { speaksApi } from './speaks-api.ts'

/** A batch lane's name in a line's mark: its model and its provider (one batch lane each). */
export const laneKey = (modelId: string, provider: string): string => `${modelId}|${provider}`

export function laneMark(
  catalog: Pick<Catalog, 'routeWithLanes' | 'provider'>,
  model: ModelEntry,
  routing: Routing | undefined,
  untranslated: PassThrough | null,
): string | undefined {
  if (!hasBatchLane(model)) return undefined
  const [first] = catalog.routeWithLanes(model, routing)
  if (!first || laneOf(first) !== 'batch') return undefined
  if (untranslated !== null && !speaksApi(catalog.provider(first.provider), untranslated))
    return undefined
  return laneKey(model.id, first.provider)
}
