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
import { createSlotQueue } from './slot-queue.ts'

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

export interface FleetGateOptions {
  /** Slots taken per Redis call when the lease grows; default limit ÷ 8. */
  block?: number
  /** How soon to ask again when Redis had fewer slots free than wanted. */
  retryMs?: number
  now?: () => number
}

// While Redis is down, how often a gate with waiting requests checks whether it is back.
const DEGRADED_RETRY_MS = 1_000

export function createFleetGate(
  slots: RedisSlots,
  limit: number,
  health: RedisHealth,
  options: FleetGateOptions = {},
): FleetGate {
  const block = Math.max(1, Math.min(limit, options.block ?? Math.ceil(limit / 8)))
  const retryMs = options.retryMs ?? 50
  let held: string[] = []
  let share = limit
  let othersWanting = false
  let fetching = false
  let fetchTimer: ReturnType<typeof setTimeout> | null = null
  let backoff = 0
  let returning: string[] = []
  let usedSinceBeat = false
  let redisCalls = 0
  let closed = false
  let beating = false

  const capacity = () => (health.degraded ? Math.max(held.length, share) : held.length)
  const queue = createSlotQueue({
    capacity,
    onTaken: () => {
      usedSinceBeat = true
    },
    onShort: () => fetchSoon(),
    now: options.now,
  })
  const learn = (view: FleetView) => {
    share = Math.max(1, Math.ceil(limit / Math.max(1, view.active)))
    othersWanting = view.othersWanting
  }

  function fetchSoon() {
    if (closed || fetching || fetchTimer) return
    // A full lease cannot grow; the heartbeat keeps the view fresh.
    if (held.length >= limit && !health.degraded) return
    if (backoff === 0) void fetch()
    else {
      fetchTimer = setTimeout(() => {
        fetchTimer = null
        void fetch()
      }, backoff)
    }
  }

  async function fetch() {
    if (queue.waiting === 0) return
    fetching = true
    try {
      const short = queue.waiting - Math.max(0, capacity() - queue.inFlight)
      let wanted = Math.min(limit - held.length, Math.max(block, short))
      // Above the fair share while others wait: only refresh the view (wanted 0).
      if (othersWanting) wanted = Math.min(wanted, Math.max(0, share - held.length))
      redisCalls++
      const result = await slots.acquire(wanted, held.length, true)
      health.ok()
      learn(result)
      if (closed) void slots.release(result.tokens, 0, false).catch(() => {})
      else held.push(...result.tokens)
      backoff = wanted > 0 && result.tokens.length === wanted ? 0 : retryMs
    } catch (error) {
      health.failed(error)
      backoff = DEGRADED_RETRY_MS
    } finally {
      fetching = false
    }
    queue.serve()
  }

  function giveBack(count: number) {
    if (count <= 0) return
    const first = returning.length === 0
    returning.push(...held.splice(held.length - count, count))
    // Slots freed in the same tick go back in one call.
    if (first) queueMicrotask(flushReturns)
  }

  function flushReturns() {
    const tokens = returning
    returning = []
    if (tokens.length === 0) return
    redisCalls++
    // A failed release is harmless: the slots expire after one TTL.
    slots.release(tokens, held.length, queue.waiting > 0).then(
      (view) => {
        health.ok()
        learn(view)
      },
      (error) => health.failed(error),
    )
  }

  return {
    get inFlight() {
      return queue.inFlight
    },
    limit,
    get held() {
      return held.length
    },
    get redisCalls() {
      return redisCalls
    },
    acquire: (signal, granted) => queue.take(signal, granted),
    release() {
      // Above the fair share while others wait: this slot goes back to the fleet, not to a waiter.
      if (
        !health.degraded &&
        othersWanting &&
        held.length > share &&
        held.length > queue.inFlight - 1
      ) {
        giveBack(1)
      }
      queue.give()
    },
    pause: (untilMs) => queue.pause(untilMs),
    async heartbeat() {
      if (closed || beating) return
      const waiting = queue.waiting
      const idle = held.length - queue.inFlight
      if (waiting === 0) {
        // Keep one block for a steady trickle; an instance that sent nothing keeps nothing.
        giveBack(idle - (usedSinceBeat ? block : 0))
      } else if (othersWanting && held.length > share) {
        giveBack(Math.min(idle, held.length - share))
      }
      usedSinceBeat = false
      if (held.length === 0 && waiting === 0) return
      redisCalls++
      beating = true
      try {
        const result = await slots.renew([...held], waiting > 0)
        health.ok()
        learn(result)
        if (result.lost.length > 0) {
          const lost = new Set(result.lost)
          held = held.filter((token) => !lost.has(token))
        }
      } catch (error) {
        health.failed(error)
      } finally {
        beating = false
      }
      queue.serve()
    },
    async releaseAll() {
      closed = true
      if (fetchTimer) clearTimeout(fetchTimer)
      queue.close()
      const tokens = [...returning, ...held]
      returning = []
      held = []
      if (tokens.length > 0) await slots.release(tokens, 0, false).catch(() => {})
    },
  }
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
      const gate = createFleetGate(slots, limit, health, { block: options.block })
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
