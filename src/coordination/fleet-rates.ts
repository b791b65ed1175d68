/**
 * The spill planner's view of a fleet, shared through Redis (docs/routing.md). Each instance measures
 * only the completions of its own lines, and holds only its own lines at a provider: two
 * instances sharing a pool each see about half of its rate against the batch's whole remainder,
 * and so would spill lines the pool can still finish in time. Once a second each instance
 * publishes, per batch and provider, its measured rate and the lines it holds there, and reads
 * back what the other instances published; an instance that stopped publishing (it died, or the
 * batch left it) drops out after STALE_MS.
 *
 * Redis unreachable: the instance plans from its own figures, as a lone instance does, and the
 * outage is logged once.
 */
import type Redis from 'ioredis'
import type { Logger } from '../telemetry/logger.ts'

/** One instance's figures for a batch on a provider. */
export interface ProviderShare {
  /** Completions per second of the batch's lines there; null before one completed. */
  perSecond: number | null
  /** The batch's lines held there (in service or waiting for a slot). */
  queued: number
}

/** Batch → provider → figures. */
export type Shares = Map<string, Map<string, ProviderShare>>

export interface FleetRates {
  /** Publishes this instance's figures and answers the other instances' sums, for the same batches. */
  exchange(mine: Shares, nowMs: number): Promise<Shares>
}

/** Two missed publications (one a second): the instance is gone, or has no line of it any more. */
const STALE_MS = 2_500
/** Each batch's hash outlives its last publication by this much. */
const KEY_TTL_MS = 30_000

export function createRedisFleetRates(
  redis: Redis,
  options: { instance: string; prefix: string; logger: Logger },
): FleetRates {
  const self = `\u0000${options.instance}`
  let down = false
  return {
    async exchange(mine, nowMs) {
      if (mine.size === 0) return new Map()
      const pipeline = redis.pipeline()
      for (const [batchId, byProvider] of mine) {
        const key = `${options.prefix}${batchId}`
        const fields: string[] = []
        for (const [provider, share] of byProvider)
          fields.push(`${provider}${self}`, `${share.perSecond ?? ''} ${share.queued} ${nowMs}`)
        if (fields.length > 0) pipeline.hset(key, ...fields).pexpire(key, KEY_TTL_MS)
        pipeline.hgetall(key)
      }
      let hashes: Record<string, string>[]
      try {
        const replies = (await pipeline.exec()) ?? []
        const failed = replies.find(([error]) => error !== null)
        if (failed || replies.length === 0) throw failed?.[0] ?? new Error('no reply')
        // The HGETALL replies: the objects among the integers HSET and PEXPIRE answer.
        hashes = replies
          .map(([, reply]) => reply)
          .filter((reply): reply is Record<string, string> => typeof reply === 'object')
      } catch (error) {
        if (!down) options.logger.warn('planner.fleet_rates_unavailable', { reason: String(error) })
        down = true
        return new Map([...mine.keys()].map((batchId) => [batchId, new Map()]))
      }
      down = false
      const others: Shares = new Map()
      let i = 0
      for (const batchId of mine.keys()) {
        const sums = new Map<string, ProviderShare>()
        for (const [field, value] of Object.entries(hashes[i++] ?? {})) {
          if (field.endsWith(self)) continue
          const [perSecond, queued, at] = value.split(' ')
          if (!(nowMs - Number(at) <= STALE_MS)) continue
          const provider = field.slice(0, field.indexOf('\u0000'))
          const sum = sums.get(provider) ?? { perSecond: null, queued: 0 }
          if (perSecond !== '') sum.perSecond = (sum.perSecond ?? 0) + Number(perSecond)
          sum.queued += Number(queued) || 0
          sums.set(provider, sum)
        }
        others.set(batchId, sums)
      }
      return others
    },
  }
}
