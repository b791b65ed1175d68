/**
 * The mark admission gives a batch line for a batch lane (NewLine.laneModel, docs/batch-lanes.md):
 * its model's id when the first offering of the line's own planner order (its routing counts) is
 * a batch lane, and the line is in a form that lane takes — a Responses or Messages line with
 * fields outside its chat translation only where the lane's provider speaks that API. Whether the
 * lane is still open is decided when the line runs; the engine judges each line again then, so a
 * catalog changed meanwhile only makes it give a mark back.
 */
import type { PassThrough } from '../../providers/types.ts'
import type { Catalog } from './catalog.ts'
import { hasBatchLane, laneOf, type ModelEntry } from './catalog-file.ts'
import type { Routing } from '../schemas/requests.ts'
import { speaksApi } from './speaks-api.ts'

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
  return model.id
}
