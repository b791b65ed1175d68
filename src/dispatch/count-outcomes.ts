/**
 * What each answered line and live call adds to the usage report and the metrics (docs/operations.md): one
 * place that turns a line's outcome or a live charge into both.
 */
import type { Catalog } from '../catalog/catalog.ts'
import { Money, moneyText } from '../money/decimal.ts'
import type { ClaimedLine, LineOutcome } from '../store/store.ts'
import type { PrometheusMetrics } from '../telemetry/prometheus.ts'
import type { UsageRecorder } from './usage-recorder.ts'

/**
 * The line an outcome is counted for: its account, and its model, asked for only when the
 * outcome does not name it (a failure's), since finding it may mean parsing the line.
 */
export type CountedLine = { accountId: string; model: () => string }

/**
 * A claimed line as counted: its model read back from its input, under its catalog id when it
 * names one by an alias, as its billed lines are counted (lineAccounting).
 */
export const countedClaim = (
  line: Pick<ClaimedLine, 'accountId' | 'input'>,
  catalog: Pick<Catalog, 'find'>,
): CountedLine => ({
  accountId: line.accountId,
  model: () => {
    const named = modelOf(line.input)
    return catalog.find(named)?.id ?? named
  },
})

/**
 * The dispatchers' count of a recorded outcome for the usage report and /metrics, at what its line
 * was charged (`chargedUsd`: its cost, or less where the account's balance ran out).
 */
export function countLineOutcomes(usage: UsageRecorder, metrics: PrometheusMetrics) {
  return (outcome: LineOutcome, line: CountedLine, chargedUsd: string) => {
    if (outcome.kind === 'retry') return
    metrics.lineFinished(outcome.kind, outcome.provider, chargedUsd)
    const accounting =
      outcome.kind === 'succeeded' || outcome.kind === 'failed' ? outcome.accounting : undefined
    usage.add({
      accountId: line.accountId,
      kind: 'line',
      model: accounting?.model ?? line.model(),
      provider: outcome.provider ?? 'none',
      inputTokens: accounting?.inputTokens ?? 0,
      cachedInputTokens: accounting?.cachedInputTokens ?? 0,
      outputTokens: accounting?.outputTokens ?? 0,
      costUsd: chargedUsd,
      firstOfferingCostUsd: accounting
        ? lessShortfall(accounting.firstOfferingCostUsd, outcome.costUsd, chargedUsd)
        : chargedUsd,
      atMs: Date.now(),
    })
  }
}

/** The live routes' `charged`: the same two counts for a live call, its costs in units (money/fixed-point.ts). */
export function countLiveCharges(usage: UsageRecorder, metrics: PrometheusMetrics) {
  return (charge: {
    accountId: string
    model: string
    provider: string
    usage: { input_tokens: number; cached_input_tokens?: number; output_tokens: number }
    costUnits: bigint
    firstOfferingCostUnits: bigint
  }) => {
    metrics.liveCharged(charge.provider, charge.costUnits)
    usage.add({
      accountId: charge.accountId,
      kind: 'live',
      model: charge.model,
      provider: charge.provider,
      inputTokens: charge.usage.input_tokens,
      cachedInputTokens: charge.usage.cached_input_tokens ?? 0,
      outputTokens: charge.usage.output_tokens,
      costUsd: charge.costUnits,
      firstOfferingCostUsd: charge.firstOfferingCostUnits,
      atMs: Date.now(),
    })
  }
}

/**
 * The first offering's price less what the balance did not cover, so that what routing saved
 * (that price less the charge) is the saving of the route alone.
 */
function lessShortfall(firstUsd: string, costUsd: string, chargedUsd: string): string {
  // Mostly the same text (both canonical): no decimal arithmetic on every line.
  if (chargedUsd === costUsd) return firstUsd
  const shortfall = new Money(costUsd).minus(chargedUsd)
  return shortfall.isZero() ? firstUsd : moneyText(new Money(firstUsd).minus(shortfall))
}

function modelOf(input: string): string {
  try {
    const model = (JSON.parse(input) as { body?: { model?: unknown } }).body?.model
    return typeof model === 'string' ? model : 'unknown'
  } catch {
    return 'unknown'
  }
}
