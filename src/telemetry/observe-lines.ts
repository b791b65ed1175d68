/**
 * What the dispatcher reports per line as it ends: one debug log line per outcome (the counters
 * count it once it is recorded, count-outcomes.ts). Ids, codes and numbers only: an upstream's
 * error message may quote the prompt.
 */
import type { LineOutcome } from '../store/store.ts'
import type { Logger } from './logger.ts'

export function observeLines(logger: Logger): (outcome: LineOutcome) => void {
  return (outcome) => {
    const fields: Record<string, unknown> = {
      batch_id: outcome.batchId,
      line: outcome.lineNo,
      status: outcome.kind,
    }
    if (outcome.kind === 'retry') {
      fields.retry_in_ms = Math.max(0, outcome.notBefore - Date.now())
    } else {
      fields.provider = outcome.provider
      fields.latency_ms = outcome.latencyMs
      fields.cost_usd = outcome.costUsd
      if (outcome.kind === 'failed') fields.error_code = outcome.error.code
    }
    logger.debug('line.outcome', fields)
  }
}
