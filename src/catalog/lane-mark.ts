/**
 * The mark admission gives a batch line for a batch lane (NewLine.batchLane, docs/batch-lanes.md):
 * the lane its own planner order (its routing counts) puts first, named by laneKey, when the line
 * is in a form that lane takes — a Responses or Messages line with fields outside its chat
 * translation only where the lane's provider speaks that API. Whether the lane is still open is
 * decided when the line runs: the lane engine takes the marked lines of open lanes, and the live
 * lanes the rest, so a line whose lane closed runs live without its mark being touched.
 */
import type { PassThrough } from '../../providers/types.ts'
import type { Catalog, PromptBound } from './catalog.ts'
import { hasBatchLane, laneOf, type ModelEntry, type Offering } from './catalog-file.ts'
import type { Routing } from '../schemas/requests.ts'
import { speaksApi } from './speaks-api.ts'

/** A batch lane's name in a line's mark: its model and its provider (one batch lane each). */
export const laneKey = (modelId: string, provider: string): string => `${modelId}|${provider}`

/** A line as its lane is chosen: its model, its routing and its prompt bound for a price cap. */
export interface LaneLine {
  model: ModelEntry
  routing: Routing | undefined
  capBound?: PromptBound
}

/**
 * The batch lane a line goes to while that lane is open: the first offering of its own planner
 * order (its routing counts), when that is a batch lane that takes the line in its form
 * (`untranslated`: the API of a line outside its chat translation, or null). The one rule by which
 * admission marks a line (laneMark) and dispatch checks the mark (laneForLine, heldForLane).
 */
export function firstBatchLane(
  catalog: Pick<Catalog, 'routeWithLanes' | 'provider'>,
  line: LaneLine,
  untranslated: PassThrough | null,
): Offering | null {
  const { model, routing, capBound } = line
  if (!hasBatchLane(model)) return null
  const [first] = catalog.routeWithLanes(model, routing, capBound)
  if (!first || laneOf(first) !== 'batch') return null
  if (untranslated !== null && !speaksApi(catalog.provider(first.provider), untranslated))
    return null
  return first
}

export function laneMark(
  catalog: Pick<Catalog, 'routeWithLanes' | 'provider'>,
  line: LaneLine,
  untranslated: PassThrough | null,
): string | undefined {
  const lane = firstBatchLane(catalog, line, untranslated)
  return lane ? laneKey(line.model.id, lane.provider) : undefined
}
