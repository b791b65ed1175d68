/**
 * What a capped batch says while its cap holds lines back, and once it has ended them (docs/money-and-limits.md,
 * §13 `max_cost_reached`): the same words from both stores.
 */
import type { BatchWaiting } from '../../domain.ts'
import { usd } from '../../money/decimal.ts'

/** Why a capped batch waits while its lines in flight finish (docs/money-and-limits.md, docs/routing.md). */
export function capWaiting(maxCostUsd: string): BatchWaiting {
  return {
    code: 'max_cost_reached',
    message:
      `max_cost_usd ($${usd(maxCostUsd)}) leaves no room for the cost ceiling of this batch's next ` +
      'lines. The lines in flight finish; every line that still does not fit then ends cancelled ' +
      'with max_cost_reached, costing nothing, and the batch completes. Nothing to do now; to run ' +
      'those lines, submit them again with a higher max_cost_usd.',
  }
}

/** The same once the cap's lines were cancelled: how many, and how to run them. */
export function capEndedWaiting(
  batchId: string,
  maxCostUsd: string,
  cancelled: number,
): BatchWaiting {
  return {
    code: 'max_cost_reached',
    message:
      `max_cost_usd ($${usd(maxCostUsd)}) was reached: ${cancelled} line${cancelled === 1 ? '' : 's'} ` +
      'did not run and ended cancelled with max_cost_reached, costing nothing. ' +
      `To run ${cancelled === 1 ? 'it' : 'them'}, submit ` +
      `GET /v1/batches/${batchId}/results?filter=failed&format=input again with a higher max_cost_usd.`,
  }
}
