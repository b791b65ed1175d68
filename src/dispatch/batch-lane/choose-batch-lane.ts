/**
 * The planner's batch-lane rule (docs/routing.md, docs/batch-lanes.md): a batch-lane offering is one more offering in
 * the planner's order (cheapest first). A line goes to it when it is the first offering of that
 * order and the lane is open for the line's batch (min_hours_left left, before deadline −
 * fallback_hours); otherwise the live lanes serve it, as they serve every live call. Only kinds
 * openai and anthropic have batch APIs.
 */
import {
  batchLaneOpen,
  batchLaneSettings,
  type BatchLaneSettings,
} from '../../catalog/batch-lane.ts'
import { laneOf, type Offering } from '../../catalog/catalog-file.ts'
import { RESPONSES_URL } from '../../domain.ts'

type Kind = 'openai' | 'anthropic'

export interface BatchLaneChoice {
  offering: Offering
  settings: BatchLaneSettings
}

/**
 * Whether a batch of lines to this URL may go to a batch lane: chat completions and embeddings.
 * A Responses line runs live, where it is translated or passed through (docs/clients/responses.md).
 */
export const laneTakes = (url: string): boolean => url !== RESPONSES_URL

/** The batch lane a line of this batch goes to now, or null for the live lanes. */
export function chooseBatchLane(
  ordered: readonly Offering[],
  deadlineMs: number,
  nowMs: number,
  kindOf: (provider: string) => Kind | undefined,
): BatchLaneChoice | null {
  const first = ordered[0]
  if (!first || laneOf(first) !== 'batch') return null
  const kind = kindOf(first.provider)
  if (kind === undefined) return null
  const settings = batchLaneSettings(first, kind)
  return batchLaneOpen(settings, deadlineMs, nowMs) ? { offering: first, settings } : null
}

/** The offerings a live call or a live-lane line may use: every lane but the batch APIs'. */
export function liveOfferings(ordered: readonly Offering[]): Offering[] {
  return ordered.filter((offering) => laneOf(offering) !== 'batch')
}
