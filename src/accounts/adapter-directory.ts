/**
 * Adapters as the request paths look them up: an account's active ones (validation of a file or
 * a live call that names an `ft:` model) and any one by id (the dispatcher, for where a pool
 * loads it from). Cached, so a live call naming an adapter does not read the store each time:
 * a registration or deactivation through this instance is seen at once (forget), one made
 * elsewhere (another instance, the CLI) within `ttlMs`.
 */
import type { AdapterLookup, AdapterRecord } from '../catalog/adapters.ts'
import type { AdapterStore } from '../store/store.ts'

export interface AdapterDirectory {
  /** The account's active adapters by id. */
  active(accountId: string): Promise<AdapterLookup>
  /** Any adapter by id, active or not (a line admitted before a deactivation still runs). */
  byId(id: string): Promise<AdapterRecord | null>
  forget(accountId: string): void
}

/** Accounts (and adapters by id) remembered; past it the memory starts over (bounded). */
const CACHE_SIZE = 4096

export function createAdapterDirectory(
  store: Pick<AdapterStore, 'listAdapters' | 'getAdapter'>,
  options: { ttlMs: number },
): AdapterDirectory {
  const accounts = new Map<string, { at: number; lookup: Promise<AdapterLookup> }>()
  const ids = new Map<string, AdapterRecord>()
  return {
    active(accountId) {
      const now = Date.now()
      const cached = accounts.get(accountId)
      if (cached && now - cached.at < options.ttlMs) return cached.lookup
      if (accounts.size >= CACHE_SIZE) accounts.clear()
      const lookup = store
        .listAdapters(accountId, { activeOnly: true })
        .then((list) => new Map(list.map((adapter) => [adapter.id, adapter])))
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
      const adapter = await store.getAdapter(id)
      // What the dispatcher needs of it (base, source) never changes once registered.
      if (adapter) {
        if (ids.size >= CACHE_SIZE) ids.clear()
        ids.set(id, adapter)
      }
      return adapter
    },
    forget(accountId) {
      accounts.delete(accountId)
    },
  }
}
