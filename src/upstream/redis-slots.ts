/**
 * A counting semaphore in Redis, shared by every gateway instance: the fleet-wide concurrency of
 * one provider. Per provider, three sorted sets scored by expiry (Redis milliseconds):
 * - `slots`: one member per slot held, `<instance>:<n>`; ZCARD is the fleet's usage;
 * - `active`: instances that hold slots or want some, for the fair share (limit ÷ active);
 * - `want`: instances with requests waiting for a slot, so holders above their share give back.
 * Expired members are dropped by every script before it counts, so the slots of an instance that
 * died without releasing come back after one TTL. Each script is one atomic step; the clock is
 * Redis's own TIME, so instances on machines with skewed clocks agree on expiry.
 */
import type Redis from 'ioredis'

const PRELUDE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = now + tonumber(ARGV[1])
for i = 1, 3 do redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', now) end
local instance = ARGV[2]
local function mark(set, on)
  if on then redis.call('ZADD', KEYS[set], expiry, instance)
  else redis.call('ZREM', KEYS[set], instance) end
end
-- Members expire by score; the keys too, so a fleet that is gone leaves nothing behind.
local function keep()
  for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], tonumber(ARGV[1]) * 2) end
end
local function view()
  local others = redis.call('ZCARD', KEYS[3]) - (redis.call('ZSCORE', KEYS[3], instance) and 1 or 0)
  return {redis.call('ZCARD', KEYS[2]), others}
end`

/** ARGV: ttl, instance, limit, wanted, wanting (0/1), first sequence number, held before. */
const ACQUIRE = `${PRELUDE}
local wanted = tonumber(ARGV[4])
local grant = math.max(0, math.min(wanted, tonumber(ARGV[3]) - redis.call('ZCARD', KEYS[1])))
local first = tonumber(ARGV[6])
for i = 0, grant - 1 do redis.call('ZADD', KEYS[1], expiry, instance .. ':' .. (first + i)) end
local held = tonumber(ARGV[7]) + grant
mark(3, ARGV[5] == '1' and (wanted == 0 or grant < wanted))
mark(2, held > 0 or ARGV[5] == '1')
keep()
local v = view()
return {grant, v[1], v[2]}`

/** ARGV: ttl, instance, wanting (0/1), tokens… Returns the tokens lost (expired meanwhile). */
const RENEW = `${PRELUDE}
local lost = {}
local held = 0
for i = 4, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', expiry, ARGV[i])
    held = held + 1
  else
    lost[#lost + 1] = ARGV[i]
  end
end
mark(3, ARGV[3] == '1')
mark(2, held > 0 or ARGV[3] == '1')
keep()
local v = view()
return {v[1], v[2], lost}`

/** ARGV: ttl, instance, still held (count), wanting (0/1), tokens… */
const RELEASE = `${PRELUDE}
for i = 5, #ARGV do redis.call('ZREM', KEYS[1], ARGV[i]) end
mark(3, ARGV[4] == '1')
mark(2, tonumber(ARGV[3]) > 0 or ARGV[4] == '1')
keep()
local v = view()
return {v[1], v[2]}`

/** What an instance knows of the fleet after a call. */
export interface FleetView {
  /** Instances holding or wanting slots of this provider, this one included. */
  active: number
  /** Other instances with requests waiting for a slot. */
  othersWanting: boolean
}

/** One provider's semaphore, from one instance. */
export interface RedisSlots {
  /** Takes up to `wanted` slots (0 only refreshes the view); `held` is how many are held now. */
  acquire(wanted: number, held: number, wanting: boolean): Promise<FleetView & { tokens: string[] }>
  /** Extends the expiry of `tokens`; returns those that had expired and are no longer ours. */
  renew(tokens: readonly string[], wanting: boolean): Promise<FleetView & { lost: string[] }>
  release(tokens: readonly string[], stillHeld: number, wanting: boolean): Promise<FleetView>
}

type Scripts = {
  mgSlotsAcquire(...args: (string | number)[]): Promise<[number, number, number]>
  mgSlotsRenew(...args: (string | number)[]): Promise<[number, number, string[]]>
  mgSlotsRelease(...args: (string | number)[]): Promise<[number, number]>
}

/** Registers the scripts on a connection (EVALSHA, loaded once). */
export function defineSlotScripts(redis: Redis) {
  redis.defineCommand('mgSlotsAcquire', { numberOfKeys: 3, lua: ACQUIRE })
  redis.defineCommand('mgSlotsRenew', { numberOfKeys: 3, lua: RENEW })
  redis.defineCommand('mgSlotsRelease', { numberOfKeys: 3, lua: RELEASE })
}

export function redisSlots(
  redis: Redis,
  options: { prefix: string; provider: string; instance: string; limit: number; ttlMs: number },
): RedisSlots {
  const scripts = redis as unknown as Scripts
  // The braces make every key of one provider hash to the same Redis Cluster slot.
  const base = `${options.prefix}{${options.provider}}`
  const keys = [`${base}:slots`, `${base}:active`, `${base}:want`]
  const head = [...keys, options.ttlMs, options.instance]
  let sequence = 0
  return {
    async acquire(wanted, held, wanting) {
      const first = sequence
      const [grant, active, others] = await scripts.mgSlotsAcquire(
        ...head,
        options.limit,
        wanted,
        wanting ? 1 : 0,
        first,
        held,
      )
      sequence += grant
      const tokens = Array.from({ length: grant }, (_, i) => `${options.instance}:${first + i}`)
      return { tokens, active, othersWanting: others > 0 }
    },
    async renew(tokens, wanting) {
      const [active, others, lost] = await scripts.mgSlotsRenew(...head, wanting ? 1 : 0, ...tokens)
      return { lost, active, othersWanting: others > 0 }
    },
    async release(tokens, stillHeld, wanting) {
      const [active, others] = await scripts.mgSlotsRelease(
        ...head,
        stillHeld,
        wanting ? 1 : 0,
        ...tokens,
      )
      return { active, othersWanting: others > 0 }
    },
  }
}
