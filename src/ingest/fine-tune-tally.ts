/**
 * The fine-tunes a file names, per base model, against the base's limits on one batch (docs/open-models.md):
 * max_per_batch, limits_by_rank, max_total_mib. A file over any is refused whole; the issue is
 * reported once per limit, at the line whose fine-tune passed it.
 */
import {
  fineTuneLimitProblem,
  type FineTuneLimitProblem,
  type FineTuneRecord,
} from '../catalog/fine-tunes.ts'
import type { ModelEntry } from '../catalog/catalog-file.ts'

export class FineTuneTally {
  private readonly seen = new Set<string>()
  private readonly byBase = new Map<string, FineTuneRecord[]>()
  private readonly reported = new Set<string>()
  private readonly overBases = new Set<string>()

  /** Counts the fine-tune if it is new to the file; the limit it made the file pass, once. */
  add(fineTune: FineTuneRecord, base: ModelEntry): Omit<FineTuneLimitProblem, 'limit'> | null {
    if (this.seen.has(fineTune.id)) return null
    this.seen.add(fineTune.id)
    let list = this.byBase.get(base.id)
    if (!list) this.byBase.set(base.id, (list = []))
    list.push(fineTune)
    const problem = fineTuneLimitProblem(base, list)
    if (!problem) return null
    this.overBases.add(base.id)
    const key = `${base.id}\u0000${problem.limit}`
    if (this.reported.has(key)) return null
    this.reported.add(key)
    return { message: problem.message, fix: problem.fix }
  }

  /** Whether the file's fine-tunes of this base already pass one of its limits. */
  over(base: ModelEntry): boolean {
    return this.overBases.has(base.id)
  }

  all(): FineTuneRecord[] {
    return [...this.byBase.values()].flat()
  }
}

/** Whether the fine-tunes of two halves of a file, together, pass a limit of their bases. */
export function fineTunesOverLimits(
  fineTunes: readonly FineTuneRecord[],
  find: (baseModel: string) => ModelEntry | undefined,
): boolean {
  const tally = new FineTuneTally()
  for (const fineTune of fineTunes) {
    const base = find(fineTune.baseModel)
    if (base) tally.add(fineTune, base)
    if (base && tally.over(base)) return true
  }
  return false
}
