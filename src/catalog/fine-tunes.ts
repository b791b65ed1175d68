/**
 * Fine-tunes (LoRA) of an account (docs/open-models.md): what one is, its `ft:` id, and what a batch
 * may name of them on one base model. The rows live in the store; the base model's catalog entry
 * says what its pools can serve.
 */
import { createHash } from 'node:crypto'
import type { Catalog } from './catalog.ts'
import type { ModelEntry, Offering } from './catalog-file.ts'

export type FineTuneStatus = 'active' | 'inactive'

/** One registered fine-tune. `id` is what lines name in `body.model`. */
export interface FineTuneRecord {
  id: string
  accountId: string
  /** The catalog id of the model it was trained from. */
  baseModel: string
  name: string
  rank: number
  sizeMib: number
  /** Where the pool loads it from (a path on the replicas, or a URI they can read). */
  source: string
  status: FineTuneStatus
  createdAt: number
  deactivatedAt: number | null
}

/** An account's active fine-tunes by id, as validation looks them up. */
export type FineTuneLookup = ReadonlyMap<string, FineTuneRecord>

export const NO_FINE_TUNES: FineTuneLookup = new Map()

export const FINE_TUNE_ID_PREFIX = 'ft:'

/** Lowercase letters, digits, '.', '_', '-': the id's parts are separated by ':'. */
export const FINE_TUNE_NAME = /^[a-z0-9][a-z0-9._-]{0,63}$/

export const isFineTuneId = (model: string) => model.startsWith(FINE_TUNE_ID_PREFIX)

/**
 * The account's part of its fine-tune ids: 12 hex digits of a hash of the account id, so an id
 * names its owner without showing the account id itself.
 */
export const accountTag = (accountId: string) =>
  createHash('sha256').update(accountId).digest('hex').slice(0, 12)

/** `ft:<base model's name without its vendor>:<account tag>:<name>`. */
export function fineTuneId(baseModel: string, accountId: string, name: string): string {
  const short = baseModel.slice(baseModel.lastIndexOf('/') + 1)
  return `${FINE_TUNE_ID_PREFIX}${short}:${accountTag(accountId)}:${name}`
}

/**
 * The same words for an id that does not exist, is another account's or is inactive, and without
 * the id, so that no answer tells one case from another (the line and path say which).
 */
export const FINE_TUNE_NOT_FOUND = 'does not exist or you do not have access to it'

/** The offerings of a model whose provider serves fine-tunes (`"lora": true`). */
export function loraOfferings(catalog: Pick<Catalog, 'provider'>, offerings: readonly Offering[]) {
  return offerings.filter((o) => catalog.provider(o.provider)?.lora === true)
}

/** The highest rank the base serves, or null when its entry sets no per-rank limits. */
export function maxRank(model: ModelEntry): number | null {
  const ranks = Object.keys(model.adapters?.limits_by_rank ?? {}).map(Number)
  return ranks.length > 0 ? Math.max(...ranks) : null
}

/** Which of the base's limits a set of fine-tunes passes, with what to say about it. */
export interface FineTuneLimitProblem {
  limit: 'max_per_batch' | 'limits_by_rank' | 'max_total_mib'
  message: string
  fix: string
}

/**
 * The first of the base model's fine-tune limits that these distinct fine-tunes pass, or null.
 * Per rank: each listed rank R with limit N allows N fine-tunes of rank above the next lower rank
 * listed (for the lowest, of any rank), so {"64": 4, "32": 8} allows 4 of rank 64 or 8 of 32.
 */
export function fineTuneLimitProblem(
  model: ModelEntry,
  fineTunes: readonly Pick<FineTuneRecord, 'rank' | 'sizeMib'>[],
): FineTuneLimitProblem | null {
  const limits = model.adapters
  if (!limits) return null
  if (fineTunes.length > limits.max_per_batch) {
    return {
      limit: 'max_per_batch',
      message: `names ${fineTunes.length} fine-tunes of ${model.id}; one batch may name at most ${limits.max_per_batch} (max_per_batch)`,
      fix: `split the file so that each batch names at most ${limits.max_per_batch} fine-tunes`,
    }
  }
  const ranks = Object.entries(limits.limits_by_rank ?? {})
    .map(([rank, count]) => ({ rank: Number(rank), count }))
    .sort((a, b) => a.rank - b.rank)
  for (let i = 0; i < ranks.length; i++) {
    const above = i === 0 ? 0 : ranks[i - 1].rank
    const n = fineTunes.filter((a) => a.rank > above).length
    if (n > ranks[i].count) {
      const which = i === 0 ? 'fine-tunes' : `fine-tunes of rank above ${above}`
      return {
        limit: 'limits_by_rank',
        message: `names ${n} ${which} of ${model.id}; one batch may name at most ${ranks[i].count} of rank ${ranks[i].rank}${i === 0 ? ' or lower' : ''} (limits_by_rank)`,
        fix: `split the file so that each batch names at most ${ranks[i].count} such fine-tunes`,
      }
    }
  }
  const total = fineTunes.reduce((sum, a) => sum + a.sizeMib, 0)
  if (limits.max_total_mib !== undefined && total > limits.max_total_mib) {
    return {
      limit: 'max_total_mib',
      message: `names fine-tunes of ${model.id} of ${total} MiB together; one batch may stage at most ${limits.max_total_mib} MiB (max_total_mib)`,
      fix: `split the file so that each batch's fine-tunes add up to at most ${limits.max_total_mib} MiB`,
    }
  }
  return null
}
