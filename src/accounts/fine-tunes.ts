/**
 * Registering, listing and deactivating an account's fine-tunes (docs/open-models.md), shared by
 * the admin API and the CLI. A registration is checked against the catalog: the base model must
 * be one a LoRA pool serves, and the fine-tune within what its entry says a batch may stage.
 */
import {
  FINE_TUNE_NAME,
  fineTuneId,
  loraOfferings,
  maxRank,
  type FineTuneRecord,
} from '../catalog/fine-tunes.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { nowSeconds } from '../domain.ts'
import { excerpt } from '../excerpt.ts'
import type { AccountStore, FineTuneStore } from '../store/store.ts'

export interface FineTuneInput {
  baseModel: string
  name: string
  rank: number
  sizeMib: number
  source: string
}

/** Why a registration was refused: which field, what was wrong and what to send instead. */
export interface FineTuneRefusal {
  kind: 'invalid' | 'no_account' | 'duplicate'
  param: string | null
  message: string
}

export interface FineTunes {
  register(accountId: string, input: FineTuneInput): Promise<FineTuneRecord | FineTuneRefusal>
  /** Null for an unknown account. */
  list(accountId: string): Promise<FineTuneRecord[] | null>
  deactivate(id: string): Promise<FineTuneRecord | null>
}

/** The highest rank any vLLM release loads (its --max-lora-rank choices end at 512). */
const MAX_RANK = 512

export function createFineTunes(
  store: FineTuneStore & Pick<AccountStore, 'getAccount'>,
  catalog: Catalog,
  /** `onChanged`: told the account whose fine-tunes changed (the gateway's fine-tune directory). */
  hooks: { onChanged?: (accountId: string) => void } = {},
): FineTunes {
  const invalid = (param: string, message: string): FineTuneRefusal => ({
    kind: 'invalid',
    param,
    message,
  })

  function check(input: FineTuneInput): FineTuneRefusal | string {
    const model = catalog.find(input.baseModel)
    if (!model) {
      const examples = catalog.models.filter((m) => m.adapters).map((m) => m.id)
      return invalid(
        'base_model',
        `names an unknown model, ${JSON.stringify(excerpt(input.baseModel))}; use a model of the catalog${examples.length ? `, for example ${examples.slice(0, 3).join(', ')}` : ''}`,
      )
    }
    if (!model.adapters || loraOfferings(catalog, catalog.usable(model)).length === 0) {
      return invalid(
        'base_model',
        `names ${model.id}, which is not served with fine-tunes on this gateway: its catalog entry needs "adapters" and an offering on a provider with "lora": true`,
      )
    }
    if (!FINE_TUNE_NAME.test(input.name)) {
      return invalid(
        'name',
        'must be 1–64 lowercase letters, digits, ".", "_" or "-", starting with a letter or digit',
      )
    }
    const highest = Math.min(maxRank(model) ?? MAX_RANK, MAX_RANK)
    if (!Number.isInteger(input.rank) || input.rank < 1 || input.rank > highest) {
      return invalid('rank', `must be a whole number from 1 to ${highest} for ${model.id}`)
    }
    const cap = model.adapters.max_total_mib
    if (cap !== undefined && input.sizeMib > cap) {
      return invalid(
        'size_mib',
        `must be at most ${cap} for ${model.id}: a batch stages at most ${cap} MiB of fine-tunes (max_total_mib)`,
      )
    }
    return model.id
  }

  return {
    async register(accountId, input) {
      const checked = check(input)
      if (typeof checked !== 'string') return checked
      const id = fineTuneId(checked, accountId, input.name)
      const result = await store.createFineTune({
        id,
        accountId,
        baseModel: checked,
        name: input.name,
        rank: input.rank,
        sizeMib: input.sizeMib,
        source: input.source,
        createdAt: nowSeconds(),
      })
      switch (result.kind) {
        case 'no_account':
          return { kind: 'no_account', param: null, message: `account ${excerpt(accountId)}` }
        case 'duplicate':
          return {
            kind: 'duplicate',
            param: 'name',
            message: `the account already has a fine-tune ${id} (${result.fineTune.status}); register it under another name`,
          }
        case 'created':
          hooks.onChanged?.(accountId)
          return result.fineTune
      }
    },
    async list(accountId) {
      if (!(await store.getAccount(accountId))) return null
      return store.listFineTunes(accountId)
    },
    async deactivate(id) {
      const fineTune = await store.deactivateFineTune(id, nowSeconds())
      if (fineTune) hooks.onChanged?.(fineTune.accountId)
      return fineTune
    },
  }
}
