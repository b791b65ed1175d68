/**
 * A quote's warning for each line a spend cap leaves no room for: a line starts only while its
 * own ceiling fits under `max_cost_usd` (docs/money-and-limits.md), so one whose ceiling alone is
 * above the cap never starts and ends `cancelled` with `max_cost_reached`. The batch is still
 * admitted, as SPEC §12 has it; the dry run says so before anything is held.
 */
import type { NewLine } from '../store/batches/batch-store.ts'
import { MAX_WARNINGS, type Warning } from '../ingest/issues.ts'
import { toUnits, unitsText } from '../money/fixed-point.ts'
import { Money, usd } from '../money/decimal.ts'

/** A quote's warnings: the file's own (FileVerdict.warnings), then the cap's, under a cap. */
export function quoteWarnings(
  verdict: { lines: readonly NewLine[]; warnings: Warning[]; warningsOmitted: number },
  maxCostUsd: string | null | undefined,
): { warnings: Warning[]; warningsOmitted: number } {
  if (!maxCostUsd) return { warnings: verdict.warnings, warningsOmitted: verdict.warningsOmitted }
  const capped = capWarnings(verdict.lines, maxCostUsd, verdict.warnings.length)
  return {
    warnings: [...verdict.warnings, ...capped.warnings],
    warningsOmitted: verdict.warningsOmitted + capped.omitted,
  }
}

/** The lines' ceilings (NewLine.ceilingUsd, asked for) against the cap, after `already` warnings. */
function capWarnings(
  lines: readonly Pick<NewLine, 'lineNo' | 'customId' | 'ceilingUsd'>[],
  maxCostUsd: string,
  already: number,
): { warnings: Warning[]; omitted: number } {
  const cap = toUnits(maxCostUsd, 'down')
  const over: { line: Pick<NewLine, 'lineNo' | 'customId'>; ceiling: bigint }[] = []
  let largest = 0n
  let omitted = 0
  for (const line of lines) {
    const ceiling = toUnits(line.ceilingUsd ?? '0', 'up')
    if (ceiling <= cap) continue
    if (ceiling > largest) largest = ceiling
    if (already + over.length < MAX_WARNINGS) over.push({ line, ceiling })
    else omitted++
  }
  const shown = (units: bigint) =>
    usd(new Money(unitsText(units)).toDecimalPlaces(6, Money.ROUND_UP))
  const cappedAt = usd(maxCostUsd)
  const warnings = over.map(({ line, ceiling }) => ({
    line: line.lineNo,
    custom_id: line.customId,
    param: 'max_cost_usd',
    message: `this line's cost ceiling of $${shown(ceiling)} is above the batch's max_cost_usd of $${cappedAt}, so it never starts and ends cancelled with max_cost_reached`,
    fix: `raise max_cost_usd to at least $${shown(largest)} (the largest line's ceiling), or lower this line's max_tokens`,
  }))
  return { warnings, omitted }
}
