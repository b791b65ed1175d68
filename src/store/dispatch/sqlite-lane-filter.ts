/** The embedded store's SQL for a claim or a look kept to some batch lanes (LaneFilter). */
import type { LaneFilter } from './dispatch-store.ts'

/**
 * The condition on `lines` (after an AND) that keeps a claim or a look to these batch lanes
 * (LaneFilter), and its parameters. One lane's names `batch_lane IS NOT NULL`, so the partial
 * index of pending lane lines serves it.
 */
export function laneCondition(lanes: LaneFilter | undefined): {
  sql: string
  params: unknown[]
} {
  if (!lanes) return { sql: '', params: [] }
  if ('only' in lanes)
    return { sql: 'AND batch_lane IS NOT NULL AND batch_lane = ?', params: [lanes.only] }
  return {
    sql: 'AND (batch_lane IS NULL OR batch_lane NOT IN (SELECT value FROM json_each(?)))',
    params: [JSON.stringify(lanes.except)],
  }
}
