/**
 * Fine-tuned adapters (LoRA) of an account (docs/open-models.md): what one is, its `ft:` id, and what a batch
 * may name of them on one base model. The rows live in the store; the base model's catalog entry
 * says what its pools can serve.
 */
import { createHash } from 'node:crypto'
import type { Catalog } from './catalog.ts'
import type { ModelEntry, Offering } from './catalog-file.ts'

export type AdapterStatus = 'active' | 'inactive'

/** One registered adapter. `id` is what lines name in `body.model`. */
export interface AdapterRecord {
  id: string
  accountId: string
  /** The catalog id of the model it was trained from. */
  baseModel: string
  name: string
  rank: number
  sizeMib: number
  /** Where the pool loads it from (a path on the replicas, or a URI they can read). */
  source: string
  status: AdapterStatus
  createdAt: number
  deactivatedAt: number | null
}

/** An account's active adapters by id, as validation looks them up. */
export type AdapterLookup = ReadonlyMap<string, AdapterRecord>

export const NO_ADAPTERS: AdapterLookup = new Map()

export const ADAPTER_ID_PREFIX = 'ft:'

/** Lowercase letters, digits, '.', '_', '-': the id's parts are separated by ':'. */
export const ADAPTER_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/

export const isAdapterId = (model: string) => model.startsWith(ADAPTER_ID_PREFIX)

/**
 * The account's part of its adapter ids: 12 hex digits of a hash of the account id, so an id
 * names its owner without showing the account id itself.
 */
export const accountTag = (accountId: string) =>
  createHash('sha256').update(accountId).digest('hex').slice(0, 12)

/** `ft:<base model's name without its vendor>:<account tag>:<name>`. */
export function adapterId(baseModel: string, accountId: string, name: string): string {
  const short = baseModel.slice(baseModel.lastIndexOf('/') + 1)
  return `${ADAPTER_ID_PREFIX}${short}:${accountTag(accountId)}:${name}`
}

/**
 * The same words for an id that does not exist, is another account's or is inactive, and without
 * the id, so that no answer tells one case from another (the line and path say which).
 */
export const ADAPTER_NOT_FOUND = 'does not exist or you do not have access to it'

/** The offerings of a model whose provider serves adapters (`"lora": true`). */
export function loraOfferings(catalog: Pick<Catalog, 'provider'>, offerings: readonly Offering[]) {
  return offerings.filter((o) => catalog.provider(o.provider)?.lora === true)
}

/** The highest rank the base serves, or null when its entry sets no per-rank limits. */
export function maxRank(model: ModelEntry): number | null {
  const ranks = Object.keys(model.adapters?.limits_by_rank ?? {}).map(Number)
  return ranks.length > 0 ? Math.max(...ranks) : null
}

/** Which of the base's limits a set of adapters passes, with what to say about it. */
export interface AdapterLimitProblem {
  limit: 'max_per_batch' | 'limits_by_rank' | 'max_total_mib'
  message: string
  fix: string
}

/**
 * The first of the base model's adapter limits that these distinct adapters pass, or null.
 * Per rank: each listed rank R with limit N allows N adapters of rank above the next lower rank
 * listed (for the lowest, of any rank), so {"64": 4, "32": 8} allows 4 of rank 64 or 8 of 32.
 */
export function adapterLimitProblem(
  model: ModelEntry,
  adapters: readonly Pick<AdapterRecord, 'rank' | 'sizeMib'>[],
): AdapterLimitProblem | null {
  const limits = model.adapters
  if (!limits) return null
  if (adapters.length > limits.max_per_batch) {
    return {
      limit: 'max_per_batch',
      message: `names ${adapters.length} adapters of ${model.id}; one batch may name at most ${limits.max_per_batch} (max_per_batch)`,
      fix: `split the file so that each batch names at most ${limits.max_per_batch} adapters`,
    }
  }
  const ranks = Object.entries(limits.limits_by_rank ?? {})
    .map(([rank, count]) => ({ rank: Number(rank), count }))
    .sort((a, b) => a.rank - b.rank)
  for (let i = 0; i < ranks.length; i++) {
    const above = i === 0 ? 0 : ranks[i - 1].rank
    const n = adapters.filter((a) => a.rank > above).length
    if (n > ranks[i].count) {
      const which = i === 0 ? 'adapters' : `adapters of rank above ${above}`
      return {
        limit: 'limits_by_rank',
        message: `names ${n} ${which} of ${model.id}; one batch may name at most ${ranks[i].count} of rank ${ranks[i].rank}${i === 0 ? ' or lower' : ''} (limits_by_rank)`,
        fix: `split the file so that each batch names at most ${ranks[i].count} such adapters`,
      }
    }
  }
  const total = adapters.reduce((sum, a) => sum + a.sizeMib, 0)
  if (limits.max_total_mib !== undefined && total > limits.max_total_mib) {
    return {
      limit: 'max_total_mib',
      message: `names adapters of ${model.id} of ${total} MiB together; one batch may stage at most ${limits.max_total_mib} MiB (max_total_mib)`,
      fix: `split the file so that each batch's adapters add up to at most ${limits.max_total_mib} MiB`,
    }
  }
  return null
}
