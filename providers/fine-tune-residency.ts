/**
 * Which fine-tunes (LoRA adapters) each replica of a pool holds (docs/open-models.md), and
 * where a call for one goes.
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
 * - A load the replica refuses while it is full of fine-tunes this instance did not load (a
 *   gateway that ran before this one, another instance of a fleet) unloads one of those and is
 *   tried once more: the replica's list is the truth, this bookkeeping only one instance's view.
 *
 * The HTTP of loading and unloading is the caller's (FineTuneCalls), so this is plain bookkeeping,
 * unit-tested on its own (test/providers/fine-tune-residency.test.ts).
 */
import { upstreamError } from './classify-error.ts'
import type { CallHealth, Replica, ReplicaPool } from './pool.ts'
import type { FineTune, UpstreamError } from './types.ts'

export type LoadResult = { ok: true } | { ok: false; error: UpstreamError; health: CallHealth }

/** The requests that load and unload a fine-tune on one replica (fine-tune-calls.ts). */
export interface FineTuneCalls {
  load(replica: Replica, fineTune: FineTune): Promise<LoadResult>
  /** Best effort: the place is counted free once this settles, whatever the replica said. */
  unload(replica: Replica, name: string): Promise<void>
  /** The fine-tunes the replica says it holds (vLLM's /v1/models); null when it cannot say. */
  held(replica: Replica): Promise<string[] | null>
}

/** One call's use of a fine-tune on a replica. */
export interface FineTuneLease {
  readonly replica: Replica
  /** The call is over: the fine-tune may be unloaded again. Once; later calls do nothing. */
  release(): void
  /** The replica said it does not hold the fine-tune: forget that it does, and release. */
  lost(): void
}

export type Acquired =
  | { ok: true; lease: FineTuneLease }
  /**
   * No replica could take the call: its load failed on `replica` (whose in-flight count this
   * module has given back already, with `health`), or the deadline passed while it waited.
   */
  | { ok: false; replica: Replica | null; error: UpstreamError; health: CallHealth }

export interface FineTuneResidency {
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

/** What a residency is made of: the pool whose replicas hold fine-tunes, and the HTTP that loads them. */
export interface ResidencyDeps {
  pool: Pick<ReplicaPool, 'replicas' | 'take' | 'release'>
  calls: FineTuneCalls
}

export interface ResidencyOptions {
  /** How many fine-tunes one replica holds at once (vLLM's --max-loras). */
  maxLoras: number
  /** How long a holder may be out before its fine-tune moves (MIGRATE_AFTER_MS). */
  migrateAfterMs?: number
}

/** The bookkeeping every step below shares: one residency's places, unloads and waiters. */
interface Residency {
  pool: ResidencyDeps['pool']
  calls: FineTuneCalls
  maxLoras: number
  migrateAfterMs: number
  places: Map<Replica, Map<string, Place>>
  /** Unloads under way, by replica and fine-tune: a load of the same fine-tune there waits for it. */
  unloading: Map<Replica, Map<string, Promise<void>>>
  waiters: Set<() => void>
  /** Orders uses for least-recently-used: raised on every use and release. */
  clock: number
}

/** Which fine-tunes each replica of `deps.pool` holds, and where a call for one goes. */
export function createFineTuneResidency(
  deps: ResidencyDeps,
  options: ResidencyOptions,
): FineTuneResidency {
  const state: Residency = {
    pool: deps.pool,
    calls: deps.calls,
    maxLoras: options.maxLoras,
    migrateAfterMs: options.migrateAfterMs ?? MIGRATE_AFTER_MS,
    places: new Map(),
    unloading: new Map(),
    waiters: new Set(),
    clock: 0,
  }
  return {
    acquire: (fineTune, signal, skip) => acquire(state, fineTune, signal, skip),
    held: (replica) =>
      [...placesOf(state, replica).values()]
        .sort((a, b) => a.lastUsed - b.lastUsed)
        .map((place) => place.name),
  }
}

function placesOf(state: Residency, replica: Replica): Map<string, Place> {
  let map = state.places.get(replica)
  if (!map) state.places.set(replica, (map = new Map()))
  return map
}

function changed(state: Residency): void {
  for (const wake of [...state.waiters]) wake()
}

/** The least recently used place no call is using, once loaded. */
function evictable(state: Residency, replica: Replica): Place | null {
  let victim: Place | null = null
  for (const place of placesOf(state, replica).values()) {
    if (place.users > 0 || place.loading) continue
    if (!victim || place.lastUsed < victim.lastUsed) victim = place
  }
  return victim
}

const hasFreePlace = (state: Residency, replica: Replica) =>
  placesOf(state, replica).size < state.maxLoras

const canLoad = (state: Residency, replica: Replica) =>
  hasFreePlace(state, replica) || evictable(state, replica) !== null

/** Healthy first, then fewest in flight; `first` breaks ties before in-flight does. */
function best(replicas: Replica[], first: (r: Replica) => number = () => 0): Replica | null {
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

function lease(state: Residency, replica: Replica, place: Place): FineTuneLease {
  let done = false
  const release = () => {
    if (done) return
    done = true
    place.users--
    place.lastUsed = ++state.clock
    changed(state)
  }
  return {
    replica,
    release,
    lost() {
      const map = placesOf(state, replica)
      if (map.get(place.name) === place && !place.loading) map.delete(place.name)
      release()
    },
  }
}

/** Takes a place on `replica` for the fine-tune (freeing its LRU one first if need be) and loads it. */
function startLoad(state: Residency, replica: Replica, fineTune: FineTune): Place {
  const map = placesOf(state, replica)
  let freed: Promise<void> | null = null
  if (!hasFreePlace(state, replica)) {
    const victim = evictable(state, replica)!
    map.delete(victim.name)
    freed = unloadOn(state, replica, victim.name)
  }
  const place: Place = { name: fineTune.name, users: 0, lastUsed: ++state.clock, loading: null }
  map.set(fineTune.name, place)
  const pending = state.unloading.get(replica)?.get(fineTune.name)
  place.loading = (async (): Promise<LoadResult> => {
    // The replica's place is free only once the unload is done, and a load of a fine-tune
    // being unloaded there must come after that unload.
    await freed
    await pending
    const result = await load(state, replica, fineTune)
    place.loading = null
    if (!result.ok && map.get(fineTune.name) === place) map.delete(fineTune.name)
    changed(state)
    return result
  })()
  return place
}

/**
 * The load itself; a call that throws is a failed load, as a refused one is. Refused with an
 * answer (the replica is up), it is tried once more after a fine-tune this instance does not
 * know of is unloaded there, if the replica holds one.
 */
async function load(state: Residency, replica: Replica, fineTune: FineTune): Promise<LoadResult> {
  try {
    const result = await state.calls.load(replica, fineTune)
    if (result.ok || result.error.status === null || result.error.status >= 500) return result
    const foreign = await foreignOn(state, replica, fineTune.name)
    if (foreign === null) return result
    await unloadOn(state, replica, foreign)
    return await state.calls.load(replica, fineTune)
  } catch (error) {
    return {
      ok: false,
      error: upstreamError('connection', `loading fine-tune failed: ${String(error)}`),
      health: 'failure',
    }
  }
}

/** A fine-tune the replica holds that this instance neither holds there nor is loading. */
async function foreignOn(state: Residency, replica: Replica, loading: string) {
  const held = await state.calls.held(replica)
  const known = placesOf(state, replica)
  return held?.find((name) => name !== loading && !known.has(name)) ?? null
}

function unloadOn(state: Residency, replica: Replica, name: string): Promise<void> {
  let map = state.unloading.get(replica)
  if (!map) state.unloading.set(replica, (map = new Map()))
  const done = state.calls
    .unload(replica, name)
    .catch(() => {})
    .finally(() => {
      if (map.get(name) === done) map.delete(name)
    })
  map.set(name, done)
  return done
}

/** Uses `place` on `replica` for one call, waiting for its load when it is under way. */
async function use(state: Residency, replica: Replica, place: Place): Promise<Acquired> {
  place.users++
  place.lastUsed = ++state.clock
  state.pool.take(replica)
  const loading = place.loading
  if (loading) {
    const result = await loading
    if (!result.ok) {
      place.users--
      state.pool.release(replica, result.health)
      changed(state)
      return { ok: false, replica, error: result.error, health: result.health }
    }
  }
  return { ok: true, lease: lease(state, replica, place) }
}

const failure = (error: UpstreamError): Acquired => ({
  ok: false,
  replica: null,
  error,
  health: 'neutral',
})

function waitForChange(state: Residency, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const wake = () => {
      state.waiters.delete(wake)
      clearTimeout(timer)
      signal.removeEventListener('abort', wake)
      resolve()
    }
    const timer = setTimeout(wake, RECHECK_MS)
    state.waiters.add(wake)
    signal.addEventListener('abort', wake, { once: true })
  })
}

/** The rules of the header, in their order, tried again whenever a place may have come free. */
async function acquire(
  state: Residency,
  fineTune: FineTune,
  signal: AbortSignal,
  skip?: ReadonlySet<Replica>,
): Promise<Acquired> {
  const { name } = fineTune
  for (;;) {
    if (signal.aborted) {
      const message = `no replica had room for fine-tune ${name} in time`
      return failure(upstreamError('timeout', message))
    }
    const candidates = state.pool.replicas.filter((replica) => !skip?.has(replica))
    if (candidates.length === 0) {
      const message = `no replica is left to load fine-tune ${name} on`
      return failure(upstreamError('connection', message))
    }
    const held = (replica: Replica) => placesOf(state, replica).get(name)!
    const holders = candidates.filter((replica) => placesOf(state, replica).has(name))
    const healthyHolder = best(holders.filter((replica) => replica.healthy))
    if (healthyHolder) return use(state, healthyHolder, held(healthyHolder))
    // No healthy replica holds it: a free place anywhere is taken before anything is unloaded.
    const free = best(candidates.filter((replica) => hasFreePlace(state, replica)))
    if (free) return use(state, free, startLoad(state, free, fineTune))
    // A replica that holds it was just taken out (a restart is seconds): it is tried again
    // rather than another fine-tune unloaded for this one, which would only move the churn.
    const holder = best(holders)
    if (returning(state, name, skip)) {
      if (holder) return use(state, holder, held(holder))
      const message = `the replica that holds fine-tune ${name} is out and no other has a free place for it`
      return failure(upstreamError('connection', message))
    }
    const loadable = best(
      candidates.filter((replica) => canLoad(state, replica)),
      (replica) => (replica.healthy ? 0 : 1),
    )
    if (loadable) return use(state, loadable, startLoad(state, loadable, fineTune))
    if (holder) return use(state, holder, held(holder))
    await waitForChange(state, signal)
  }
}

/** Whether a replica that holds `name` was taken out (or skipped) only just now. */
function returning(state: Residency, name: string, skip?: ReadonlySet<Replica>): boolean {
  return state.pool.replicas.some(
    (replica) =>
      placesOf(state, replica).has(name) &&
      (skip?.has(replica) || !replica.healthy) &&
      Date.now() - (replica.outSince ?? Date.now()) < state.migrateAfterMs,
  )
}
