/**
 * Key lookups cached per instance, so an authenticated request does no store read (the live
 * path's budget is tens of microseconds; a PostgreSQL round trip is hundreds). An entry serves
 * for `ttlMs` after it was read; past half of that the next request refreshes it in the
 * background, and past all of it the request waits for the store. A key revoked on any instance
 * (or, on PostgreSQL, by the CLI) is forgotten by every instance at once (`forgetKey`, told on
 * the store's channel by coordination/key-revocations.ts); were that message lost, or the CLI run
 * beside an SQLite gateway, within `ttlMs` plus one store read. Unknown keys are not cached: they are asked for every time, as before.
 */
import type { AccountRecord, KeyRecord } from '../domain.ts'

type Found = { key: KeyRecord; account: AccountRecord }

export interface KeyCache {
  find(hash: string): Promise<Found | null>
  /** Drops a key (revoked here) so its next request asks the store. */
  forgetKey(keyId: string): void
}

interface Entry {
  found: Found
  readAt: number
  refreshing: Promise<Found | null> | null
}

/** Enough for every key a fleet serves at once; the oldest entry goes first past it. */
const MAX_ENTRIES = 10_000

export function createKeyCache(
  lookup: (hash: string) => Promise<Found | null>,
  options: { ttlMs: number; now?: () => number },
): KeyCache {
  const { ttlMs } = options
  const now = options.now ?? Date.now
  const entries = new Map<string, Entry>()
  const inFlight = new Map<string, Promise<Found | null>>()
  // Bumped by forgetKey: a read that began before it may have seen the key still live.
  let generation = 0

  function read(hash: string): Promise<Found | null> {
    let pending = inFlight.get(hash)
    if (pending) return pending
    const startedAt = now()
    const startedIn = generation
    pending = lookup(hash)
      .then((found) => {
        if (!found || startedIn !== generation) entries.delete(hash)
        else {
          if (!entries.has(hash) && entries.size >= MAX_ENTRIES)
            entries.delete(entries.keys().next().value!)
          entries.set(hash, { found, readAt: startedAt, refreshing: null })
        }
        return found
      })
      .finally(() => inFlight.delete(hash))
    inFlight.set(hash, pending)
    return pending
  }

  return {
    find(hash) {
      if (ttlMs <= 0) return lookup(hash)
      const entry = entries.get(hash)
      if (entry) {
        const age = now() - entry.readAt
        if (age < ttlMs) {
          if (age >= ttlMs / 2 && !inFlight.has(hash)) void read(hash).catch(() => {})
          return Promise.resolve(entry.found)
        }
      }
      return read(hash)
    },
    forgetKey(keyId) {
      generation++
      for (const [hash, entry] of entries) if (entry.found.key.id === keyId) entries.delete(hash)
    },
  }
}
