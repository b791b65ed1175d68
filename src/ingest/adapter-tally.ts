/**
 * The adapters a file names, per base model, against the base's limits on one batch (docs/open-models.md):
 * max_per_batch, limits_by_rank, max_total_mib. A file over any is refused whole; the issue is
 * reported once per limit, at the line whose adapter passed it.
 */
import {
  adapterLimitProblem,
  type AdapterLimitProblem,
  type AdapterRecord,
} from '../catalog/adapters.ts'
import type { ModelEntry } from '../catalog/catalog-file.ts'

export class AdapterTally {
  private readonly seen = new Set<string>()
  private readonly byBase = new Map<string, AdapterRecord[]>()
  private readonly reported = new Set<string>()
  private readonly overBases = new Set<string>()

  /** Counts the adapter if it is new to the file; the limit it made the file pass, once. */
  add(adapter: AdapterRecord, base: ModelEntry): Omit<AdapterLimitProblem, 'limit'> | null {
    if (this.seen.has(adapter.id)) return null
    this.seen.add(adapter.id)
    let list = this.byBase.get(base.id)
    if (!list) this.byBase.set(base.id, (list = []))
    list.push(adapter)
    const problem = adapterLimitProblem(base, list)
    if (!problem) return null
    this.overBases.add(base.id)
    const key = `${base.id}\u0000${problem.limit}`
    if (this.reported.has(key)) return null
    this.reported.add(key)
    return { message: problem.message, fix: problem.fix }
  }

  /** Whether the file's adapters of this base already pass one of its limits. */
  over(base: ModelEntry): boolean {
    return this.overBases.has(base.id)
  }

  all(): AdapterRecord[] {
    return [...this.byBase.values()].flat()
  }
}

/** Whether the adapters of two halves of a file, together, pass a limit of their bases. */
export function adaptersOverLimits(
  adapters: readonly AdapterRecord[],
  find: (baseModel: string) => ModelEntry | undefined,
): boolean {
  const tally = new AdapterTally()
  for (const adapter of adapters) {
    const base = find(adapter.baseModel)
    if (base) tally.add(adapter, base)
    if (base && tally.over(base)) return true
  }
  return false
}
