/**
 * Fine-tunes as the request paths look them up: an account's active ones (validation of a file or
 * a live call that names an `ft:` model) and any one by id (the dispatcher, for where a pool
 * loads it from). Cached, so a live call naming a fine-tune does not read the store each time:
 * a registration or deactivation through this instance is seen at once (forget), one made
 * elsewhere (another instance, the CLI) within `ttlMs`.
 */
import type { FineTuneLookup, FineTuneRecord } from '../catalog/fine-tunes.ts'
import type { FineTuneStore } from '../store/store.ts'

export interface FineTuneDirectory {
  /** The account's active fine-tunes by id. */
  active(accountId: string): Promise<FineTuneLookup>
  /** Any fine-tune by id, active or not (a line admitted before a deactivation still runs). */
  byId(id: string): Promise<FineTuneRecord | null>
  forget(accountId: string): void
}

/** Accounts (and fine-tunes by id) remembered; past it the memory starts over (bounded). */
const CACHE_SIZE = 4096

export function createFineTuneDirectory(
  store: Pick<FineTuneStore, 'listFineTunes' | 'getFineTune'>,
  options: { ttlMs: number },
): FineTuneDirectory {
  const accounts = new Map<string, { at: number; lookup: Promise<FineTuneLookup> }>()
  const ids = new Map<string, FineTuneRecord>()
  return {
    active(accountId) {
      const now = Date.now()
      const cached = accounts.get(accountId)
      if (cached && now - cached.at < options.ttlMs) return cached.lookup
      if (accounts.size >= CACHE_SIZE) accounts.clear()
      const lookup = store
        .listFineTunes(accountId, { activeOnly: true })
        .then((list) => new Map(list.map((fineTune) => [fineTune.id, fineTune])))
      const entry = { at: now, lookup }
      // A failed read is not remembered: the next call asks again.
      lookup.catch(() => {
        if (accounts.get(accountId) === entry) accounts.delete(accountId)
      })
      accounts.set(accountId, entry)
      return lookup
    },
    async byId(id) {
      const cached = ids.get(id)
      if (cached) return cached
      const fineTune = await store.getFineTune(id)
      // What the dispatcher needs of it (base, source) never changes once registered.
      if (fineTune) {
        if (ids.size >= CACHE_SIZE) ids.clear()
        ids.set(id, fineTune)
      }
      return fineTune
    },
    forget(accountId) {
      accounts.delete(accountId)
    },
  }
}
