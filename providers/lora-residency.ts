/**
 * Which fine-tunes (LoRA adapters) each replica of a pool holds (docs/open-models.md), and where a call for one goes.
 *
 * - A healthy replica that holds the fine-tune (or is loading it) is preferred; among several,
 *   the one with the fewest in flight.
 * - Otherwise it is loaded where a place is free, healthy replicas first.
 * - With no free place: if a replica that holds it was taken out only just now (a restart takes
 *   seconds), the call goes there anyway, or fails retryably when that replica is the one it
 *   could not reach: unloading another fine-tune to move this one would only move the churn.
 *   Otherwise the least recently used fine-tune no call is using is unloaded from a replica, and
 *   this one loaded in its place.
 * - A replica never holds more than `maxLoras`, counting fine-tunes being loaded; a fine-tune a
 *   call is using is never unloaded under it; an unload ends before the load that takes its place.
 * - Calls that want the same fine-tune while it loads share that one load.
 * - When every place is in use, the call waits (within its deadline) for one to come free.
 * - A replica that answered that it does not hold a fine-tune (it restarted and lost it) is
 *   forgotten as holding it (lost()), and the next acquire loads it again.
 *
 * The HTTP of loading and unloading is the caller's (LoraCalls), so this is plain bookkeeping,
 * unit-tested on its own (test/providers/lora-residency.test.ts). One gateway instance's view:
 * it assumes no one else loads fine-tunes on the same replicas.
 */
import { upstreamError } from './classify-error.ts'
import type { CallHealth, Replica, ReplicaPool } from './pool.ts'
import type { FineTune, UpstreamError } from './types.ts'

export type LoadResult = { ok: true } | { ok: false; error: UpstreamError; health: CallHealth }

/** The requests that load and unload a fine-tune on one replica (lora-calls.ts). */
export interface LoraCalls {
  load(replica: Replica, fineTune: FineTune): Promise<LoadResult>
  /** Best effort: the place is counted free once this settles, whatever the replica said. */
  unload(replica: Replica, name: string): Promise<void>
}

/** One call's use of a fine-tune on a replica. */
export interface LoraLease {
  readonly replica: Replica
  /** The call is over: the fine-tune may be unloaded again. Once; later calls do nothing. */
  release(): void
  /** The replica said it does not hold the fine-tune: forget that it does, and release. */
  lost(): void
}

export type Acquired =
  | { ok: true; lease: LoraLease }
  /**
   * No replica could take the call: its load failed on `replica` (whose in-flight count this
   * module has given back already, with `health`), or the deadline passed while it waited.
   */
  | { ok: false; replica: Replica | null; error: UpstreamError; health: CallHealth }

export interface LoraResidency {
  /**
   * A replica that holds the fine-tune, its in-flight count raised (the caller gives it back with
   * pool.release, as for pool.acquire) and the fine-tune kept there until the lease is released.
   * Replicas in `skip` are not considered.
   */
  acquire(fineTune: FineTune, signal: AbortSignal, skip?: ReadonlySet<Replica>): Promise<Acquired>
  /** The fine-tunes a replica holds or is loading, least recently used first. */
  held(replica: Replica): string[]
}

interface Place {
  name: string
  /** Calls using it now; only a place at 0 may be taken for another fine-tune. */
  users: number
  lastUsed: number
  /** Set while the load is under way: every call that wants it waits on the same one. */
  loading: Promise<LoadResult> | null
}

/** Waiters look again at least this often, in case a change came while they were not looking. */
const RECHECK_MS = 250

/**
 * How long a replica that holds a fine-tune may be out before the fine-tune is loaded elsewhere in
 * another's place: two probe intervals (pool.ts), longer than a replica restart takes.
 */
const MIGRATE_AFTER_MS = 10_000

export function createLoraResidency(
  pool: Pick<ReplicaPool, 'replicas' | 'take' | 'release'>,
  maxLoras: number,
  calls: LoraCalls,
  options: { migrateAfterMs?: number } = {},
): LoraResidency {
  const migrateAfterMs = options.migrateAfterMs ?? MIGRATE_AFTER_MS
  const places = new Map<Replica, Map<string, Place>>()
  /** Unloads under way, by replica and fine-tune: a load of the same fine-tune there waits for it. */
  const unloading = new Map<Replica, Map<string, Promise<void>>>()
  const waiters = new Set<() => void>()
  let clock = 0

  const placesOf = (replica: Replica) => {
    let map = places.get(replica)
    if (!map) places.set(replica, (map = new Map()))
    return map
  }
  const changed = () => {
    for (const wake of [...waiters]) wake()
  }

  /** The least recently used place no call is using, once loaded. */
  const evictable = (replica: Replica): Place | null => {
    let victim: Place | null = null
    for (const place of placesOf(replica).values()) {
      if (place.users > 0 || place.loading) continue
      if (!victim || place.lastUsed < victim.lastUsed) victim = place
    }
    return victim
  }
  const hasFreePlace = (replica: Replica) => placesOf(replica).size < maxLoras
  const canLoad = (replica: Replica) => hasFreePlace(replica) || evictable(replica) !== null

  /** Healthy first, then fewest in flight; `first` breaks ties before in-flight does. */
  const best = (replicas: Replica[], first: (r: Replica) => number = () => 0) => {
    let chosen: Replica | null = null
    for (const replica of replicas) {
      if (!chosen) chosen = replica
      else if (replica.healthy !== chosen.healthy) {
        if (replica.healthy) chosen = replica
      } else if (first(replica) !== first(chosen)) {
        if (first(replica) < first(chosen)) chosen = replica
      } else if (replica.inFlight < chosen.inFlight) chosen = replica
    }
    return chosen
  }

  function lease(replica: Replica, place: Place): LoraLease {
    let done = false
    const release = () => {
      if (done) return
      done = true
      place.users--
      place.lastUsed = ++clock
      changed()
    }
    return {
      replica,
      release,
      lost() {
        const map = placesOf(replica)
        if (map.get(place.name) === place && !place.loading) map.delete(place.name)
        release()
      },
    }
  }

  /** Takes a place on `replica` for the fine-tune (freeing its LRU one first if need be) and loads it. */
  function startLoad(replica: Replica, fineTune: FineTune): Place {
    const map = placesOf(replica)
    let freed: Promise<void> | null = null
    if (!hasFreePlace(replica)) {
      const victim = evictable(replica)!
      map.delete(victim.name)
      freed = unloadOn(replica, victim.name)
    }
    const place: Place = { name: fineTune.name, users: 0, lastUsed: ++clock, loading: null }
    map.set(fineTune.name, place)
    const pending = unloading.get(replica)?.get(fineTune.name)
    place.loading = (async (): Promise<LoadResult> => {
      // The replica's place is free only once the unload is done, and a load of a fine-tune
      // being unloaded there must come after that unload.
      await freed
      await pending
      let result: LoadResult
      try {
        result = await calls.load(replica, fineTune)
      } catch (error) {
        result = {
          ok: false,
          error: upstreamError('connection', `loading fine-tune failed: ${String(error)}`),
          health: 'failure',
        }
      }
      place.loading = null
      if (!result.ok && map.get(fineTune.name) === place) map.delete(fineTune.name)
      changed()
      return result
    })()
    return place
  }

  function unloadOn(replica: Replica, name: string): Promise<void> {
    let map = unloading.get(replica)
    if (!map) unloading.set(replica, (map = new Map()))
    const done = calls
      .unload(replica, name)
      .catch(() => {})
      .finally(() => {
        if (map.get(name) === done) map.delete(name)
      })
    map.set(name, done)
    return done
  }

  /** Uses `place` on `replica` for one call, waiting for its load when it is under way. */
  async function use(replica: Replica, place: Place): Promise<Acquired> {
    place.users++
    place.lastUsed = ++clock
    pool.take(replica)
    const loading = place.loading
    if (loading) {
      const result = await loading
      if (!result.ok) {
        place.users--
        pool.release(replica, result.health)
        changed()
        return { ok: false, replica, error: result.error, health: result.health }
      }
    }
    return { ok: true, lease: lease(replica, place) }
  }

  const failure = (error: UpstreamError): Acquired => ({
    ok: false,
    replica: null,
    error,
    health: 'neutral',
  })

  function waitForChange(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const wake = () => {
        waiters.delete(wake)
        clearTimeout(timer)
        signal.removeEventListener('abort', wake)
        resolve()
      }
      const timer = setTimeout(wake, RECHECK_MS)
      waiters.add(wake)
      signal.addEventListener('abort', wake, { once: true })
    })
  }

  return {
    async acquire(fineTune, signal, skip) {
      const { name } = fineTune
      for (;;) {
        if (signal.aborted) {
          const message = `no replica had room for fine-tune ${name} in time`
          return failure(upstreamError('timeout', message))
        }
        const candidates = pool.replicas.filter((replica) => !skip?.has(replica))
        if (candidates.length === 0) {
          const message = `no replica is left to load fine-tune ${name} on`
          return failure(upstreamError('connection', message))
        }
        const holders = candidates.filter((replica) => placesOf(replica).has(name))
        const healthyHolder = best(holders.filter((replica) => replica.healthy))
        if (healthyHolder) return use(healthyHolder, placesOf(healthyHolder).get(name)!)
        // No healthy replica holds it: a free place anywhere is taken before anything is unloaded.
        const free = best(candidates.filter(hasFreePlace))
        if (free) return use(free, startLoad(free, fineTune))
        // A replica that holds it was just taken out (a restart is seconds): it is tried again
        // rather than another fine-tune unloaded for this one, which would only move the churn.
        const returning = pool.replicas.some(
          (replica) =>
            placesOf(replica).has(name) &&
            (skip?.has(replica) || !replica.healthy) &&
            Date.now() - (replica.outSince ?? Date.now()) < migrateAfterMs,
        )
        const holder = best(holders)
        if (returning) {
          if (holder) return use(holder, placesOf(holder).get(name)!)
          const message = `the replica that holds fine-tune ${name} is out and no other has a free place for it`
          return failure(upstreamError('connection', message))
        }
        const loadable = best(candidates.filter(canLoad), (replica) => (replica.healthy ? 0 : 1))
        if (loadable) return use(loadable, startLoad(loadable, fineTune))
        if (holder) return use(holder, placesOf(holder).get(name)!)
        await waitForChange(signal)
      }
    },
    held(replica) {
      return [...placesOf(replica).values()]
        .sort((a, b) => a.lastUsed - b.lastUsed)
        .map((place) => place.name)
    },
  }
}
