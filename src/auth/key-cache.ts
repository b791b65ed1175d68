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
/**
 * How long requests wait on one store lookup of a key. Every request of the key shares it, so a
 * lookup that never ends (a connection a firewall dropped without a word) would hold the key on
 * this instance until the kernel gave up on it: past this, it is let go, the waiting requests are
 * refused as the store's outage (503), and the next request asks again.
 */
const LOOKUP_WAIT_MS = 10_000

export function createKeyCache(
  lookup: (hash: string) => Promise<Found | null>,
  options: { ttlMs: number; now?: () => number; lookupWaitMs?: number },
): KeyCache {
  const { ttlMs } = options
  const lookupWaitMs = options.lookupWaitMs ?? LOOKUP_WAIT_MS
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
    pending = bounded(lookup(hash), lookupWaitMs)
      .then((found) => {
        if (!found || startedIn !== generation) entries.delete(hash)
        else {
          if (!entries.has(hash) && entries.size >= MAX_ENTRIES)
            entries.delete(entries.keys().next().value!)
          entries.set(hash, { found, readAt: startedAt, refreshing: null })
        }
        return found
      })
      .finally(() => {
        if (inFlight.get(hash) === pending) inFlight.delete(hash)
      })
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

/** `lookup`, or past `ms` a refusal coded as the store's timeout (app.ts answers it 503). */
function bounded<T>(lookup: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error = new Error(`the store did not answer a key lookup within ${ms} ms`)
      reject(Object.assign(error, { code: 'ETIMEDOUT' }))
    }, ms)
  })
  return Promise.race([lookup, late]).finally(() => clearTimeout(timer))
}
