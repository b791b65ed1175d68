/**
 * A provider's concurrency bound for the whole fleet (REDIS_URL set): each instance keeps a local
 * lease of slots taken from the Redis semaphore (redis-slots.ts) in blocks, and hands requests
 * those slots in process (slot-queue.ts, the same queue as the in-process gate's). Redis is called when the lease must grow, when slots go back, and on
 * the heartbeat — not per request — so its cost is per block and per beat, not per line.
 *
 * Fairness: the fair share is limit ÷ instances holding or wanting slots. An instance with
 * requests waiting says so in Redis; an instance holding more than its share gives slots back as
 * its requests finish, so a newcomer gets its share within a heartbeat or two. Idle slots go back
 * on the heartbeat. Slots are renewed by the heartbeat and expire after `ttlMs` without one, so
 * a crashed instance's slots return to the fleet.
 *
 * Redis unreachable: the slots held are kept, and up to the last fair share seen is used, so the
 * fleet stays near its bound and requests keep flowing; the outage is logged once.
 */
import type Redis from 'ioredis'
import type { Logger } from '../telemetry/logger.ts'
import type { ProviderGate } from './provider-gate.ts'
import { defineSlotScripts, redisSlots, type FleetView, type RedisSlots } from './redis-slots.ts'
import { createSlotQueue, type SlotQueue } from './slot-queue.ts'

/** A ProviderGate backed by the fleet's semaphore. */
export interface FleetGate extends ProviderGate {
  /** Renews the lease, gives back idle slots, refreshes the fair share. */
  heartbeat(): Promise<void>
  /** Gives every slot back (shutdown). */
  releaseAll(): Promise<void>
  /** Slots leased from Redis right now. */
  readonly held: number
  /** Redis round trips so far: the gate's cost. */
  readonly redisCalls: number
}

/** Shared by the gates of one connection: whether Redis answers, logged once per outage. */
export interface RedisHealth {
  readonly degraded: boolean
  ok(): void
  failed(error: unknown): void
}

/** What a fleet gate calls on: its provider's slots in Redis and the connection's health. */
export interface FleetGateDeps {
  slots: RedisSlots
  health: RedisHealth
}

export interface FleetGateOptions {
  /** The provider's concurrency bound across the fleet. */
  limit: number
  /** Slots taken per Redis call when the lease grows; default limit ÷ 8. */
  block?: number
  /** How soon to ask again when Redis had fewer slots free than wanted. */
  retryMs?: number
  now?: () => number
}

// While Redis is down, how often a gate with waiting requests checks whether it is back.
const DEGRADED_RETRY_MS = 1_000

/** One gate's lease of slots and what it knows of the fleet: the state its steps share. */
interface Lease {
  readonly deps: FleetGateDeps
  readonly limit: number
  readonly block: number
  readonly retryMs: number
  readonly queue: SlotQueue
  /** The slot tokens held from Redis. */
  held: string[]
  /** The last fair share seen: limit ÷ instances holding or wanting slots. */
  share: number
  othersWanting: boolean
  fetching: boolean
  fetchTimer: ReturnType<typeof setTimeout> | null
  backoff: number
  /** Slots freed in this tick, given back together. */
  returning: string[]
  usedSinceBeat: boolean
  redisCalls: number
  closed: boolean
  beating: boolean
}

export function createFleetGate(deps: FleetGateDeps, options: FleetGateOptions): FleetGate {
  const { limit } = options
  const lease: Lease = {
    deps,
    limit,
    block: Math.max(1, Math.min(limit, options.block ?? Math.ceil(limit / 8))),
    retryMs: options.retryMs ?? 50,
    queue: createSlotQueue({
      capacity: () => capacity(lease),
      onTaken: () => {
        lease.usedSinceBeat = true
      },
      onShort: () => fetchSoon(lease),
      now: options.now,
    }),
    held: [],
    share: limit,
    othersWanting: false,
    fetching: false,
    fetchTimer: null,
    backoff: 0,
    returning: [],
    usedSinceBeat: false,
    redisCalls: 0,
    closed: false,
    beating: false,
  }
  const queue = lease.queue
  return {
    get inFlight() {
      return queue.inFlight
    },
    limit,
    get held() {
      return lease.held.length
    },
    get redisCalls() {
      return lease.redisCalls
    },
    acquire: (signal, granted, place) => queue.take(signal, granted, place),
    release: () => release(lease),
    pause: (untilMs) => queue.pause(untilMs),
    heartbeat: () => heartbeat(lease),
    releaseAll: () => releaseAll(lease),
  }
}

/** The slots requests may use: those held, or while Redis is down up to the last fair share. */
function capacity(lease: Lease): number {
  const held = lease.held.length
  return lease.deps.health.degraded ? Math.max(held, lease.share) : held
}

function learn(lease: Lease, view: FleetView) {
  lease.share = Math.max(1, Math.ceil(lease.limit / Math.max(1, view.active)))
  lease.othersWanting = view.othersWanting
}

/** Requests wait that the slots held cannot serve: grow the lease, now or after the backoff. */
function fetchSoon(lease: Lease) {
  if (lease.closed || lease.fetching || lease.fetchTimer) return
  // A full lease cannot grow; the heartbeat keeps the view fresh.
  if (lease.held.length >= lease.limit && !lease.deps.health.degraded) return
  if (lease.backoff === 0) void fetchSlots(lease)
  else {
    lease.fetchTimer = setTimeout(() => {
      lease.fetchTimer = null
      void fetchSlots(lease)
    }, lease.backoff)
  }
}

async function fetchSlots(lease: Lease) {
  const { queue, deps, limit } = lease
  if (queue.waiting === 0) return
  lease.fetching = true
  try {
    const short = queue.waiting - Math.max(0, capacity(lease) - queue.inFlight)
    let wanted = Math.min(limit - lease.held.length, Math.max(lease.block, short))
    // Above the fair share while others wait: only refresh the view (wanted 0).
    if (lease.othersWanting) wanted = Math.min(wanted, Math.max(0, lease.share - lease.held.length))
    lease.redisCalls++
    const result = await deps.slots.acquire(wanted, lease.held.length, true)
    deps.health.ok()
    learn(lease, result)
    if (lease.closed) void deps.slots.release(result.tokens, 0, false).catch(() => {})
    else lease.held.push(...result.tokens)
    lease.backoff = wanted > 0 && result.tokens.length === wanted ? 0 : lease.retryMs
  } catch (error) {
    deps.health.failed(error)
    lease.backoff = DEGRADED_RETRY_MS
  } finally {
    lease.fetching = false
  }
  queue.serve()
}

function giveBack(lease: Lease, count: number) {
  if (count <= 0) return
  const first = lease.returning.length === 0
  lease.returning.push(...lease.held.splice(lease.held.length - count, count))
  // Slots freed in the same tick go back in one call.
  if (first) queueMicrotask(() => flushReturns(lease))
}

function flushReturns(lease: Lease) {
  const tokens = lease.returning
  lease.returning = []
  if (tokens.length === 0) return
  lease.redisCalls++
  const { health, slots } = lease.deps
  // A failed release is harmless: the slots expire after one TTL.
  slots.release(tokens, lease.held.length, lease.queue.waiting > 0).then(
    (view) => {
      health.ok()
      learn(lease, view)
    },
    (error) => health.failed(error),
  )
}

function release(lease: Lease) {
  const { held, queue } = lease
  // Above the fair share while others wait: this slot goes back to the fleet, not to a waiter.
  if (
    !lease.deps.health.degraded &&
    lease.othersWanting &&
    held.length > lease.share &&
    held.length > queue.inFlight - 1
  ) {
    giveBack(lease, 1)
  }
  queue.give()
}

/** Renews the lease, gives back idle slots, refreshes the fair share. */
async function heartbeat(lease: Lease) {
  if (lease.closed || lease.beating) return
  const { queue, deps } = lease
  const waiting = queue.waiting
  const idle = lease.held.length - queue.inFlight
  if (waiting === 0) {
    // Keep one block for a steady trickle; an instance that sent nothing keeps nothing.
    giveBack(lease, idle - (lease.usedSinceBeat ? lease.block : 0))
  } else if (lease.othersWanting && lease.held.length > lease.share) {
    giveBack(lease, Math.min(idle, lease.held.length - lease.share))
  }
  lease.usedSinceBeat = false
  if (lease.held.length === 0 && waiting === 0) return
  lease.redisCalls++
  lease.beating = true
  try {
    const result = await deps.slots.renew([...lease.held], waiting > 0)
    deps.health.ok()
    learn(lease, result)
    if (result.lost.length > 0) {
      const lost = new Set(result.lost)
      lease.held = lease.held.filter((token) => !lost.has(token))
    }
  } catch (error) {
    deps.health.failed(error)
  } finally {
    lease.beating = false
  }
  queue.serve()
}

async function releaseAll(lease: Lease) {
  lease.closed = true
  if (lease.fetchTimer) clearTimeout(lease.fetchTimer)
  lease.queue.close()
  const tokens = [...lease.returning, ...lease.held]
  lease.returning = []
  lease.held = []
  if (tokens.length > 0) await lease.deps.slots.release(tokens, 0, false).catch(() => {})
}

/** The fleet gates of one instance: one heartbeat for all providers, on the instance's Redis connection. */
export interface FleetGates {
  gate(provider: string, limit: number): FleetGate
  /** Gives every slot back; the connection is the caller's to close. */
  close(): Promise<void>
}

export interface FleetGatesOptions {
  /** This instance; slot tokens carry it. */
  instance: string
  /** How long slots outlive a missed heartbeat (the line lease's length is a good value). */
  ttlMs: number
  logger: Logger
  /** Key prefix, so test runs and fleets can share one Redis. */
  prefix?: string
  block?: number
}

/** `redis`: the instance's connection (src/coordination/redis.ts), opened to fail fast while Redis is away. */
export function createFleetGates(redis: Redis, options: FleetGatesOptions): FleetGates {
  defineSlotScripts(redis)
  let degraded = false
  const health: RedisHealth = {
    get degraded() {
      return degraded
    },
    ok() {
      if (degraded) options.logger.info('fleet_gate.redis_recovered')
      degraded = false
    },
    failed(error) {
      if (!degraded) {
        options.logger.warn('fleet_gate.redis_unreachable', {
          reason: (error as Error)?.message ?? String(error),
          fallback: 'slots held, up to the last fair share',
        })
      }
      degraded = true
    },
  }
  // Back: an idle gate makes no call that would notice, so the connection says so.
  const onReady = () => health.ok()
  const onError = (error: unknown) => health.failed(error)
  redis.on('error', onError)
  redis.on('ready', onReady)
  const gates: FleetGate[] = []
  // Often enough that a newcomer gets its share within a second, and well inside the TTL.
  const beat = setInterval(
    () => {
      for (const gate of gates) void gate.heartbeat()
    },
    Math.max(50, Math.min(500, options.ttlMs / 3)),
  )
  return {
    gate(provider, limit) {
      const slots = redisSlots(redis, {
        prefix: options.prefix ?? 'mg:sem:',
        provider,
        instance: options.instance,
        limit,
        ttlMs: options.ttlMs,
      })
      const gate = createFleetGate({ slots, health }, { limit, block: options.block })
      gates.push(gate)
      return gate
    },
    async close() {
      clearInterval(beat)
      await Promise.all(gates.map((gate) => gate.releaseAll()))
      redis.off('error', onError)
      redis.off('ready', onReady)
    },
  }
}
