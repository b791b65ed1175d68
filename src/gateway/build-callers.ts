/** Who may call, and whom the gateway calls: keys, the live ledger, the provider gates and upstreams. */
import { createAuthenticator, type Authenticator } from '../auth/authenticate.ts'
import { createKeyCache, type KeyCache } from '../auth/key-cache.ts'
import { createLiveCredit, type LiveCredit } from '../live/live-credit.ts'
import { createFleetGates, type FleetGates } from '../upstream/fleet-gate.ts'
import { createUpstreams, type Upstreams } from '../upstream/upstreams.ts'
import type { GatewayCore } from './gateway-core.ts'

/** The key cache, the authenticator and the live path's credit ledger. */
export function buildAccess(core: GatewayCore): {
  keys: KeyCache
  auth: Authenticator
  credit: LiveCredit
} {
  const { config, store, logger } = core
  const keys = createKeyCache((hash) => store.findKey(hash), { ttlMs: config.live.keyCacheMs })
  const auth = createAuthenticator(store, core.limiter, core.telemetry, keys)
  const credit = createLiveCredit(store, {
    instanceId: core.instanceId,
    chargeIntervalMs: config.live.chargeIntervalMs,
    leaseTtlMs: config.live.leaseTtlMs,
    idleMs: config.live.leaseIdleMs,
    blockCalls: config.live.leaseBlockCalls,
    logger,
    now: core.clock,
  })
  return { keys, auth, credit }
}

/** The providers as called; with Redis, each provider's max_concurrency holds for the whole fleet, not per instance. */
export function buildUpstreams(core: GatewayCore): {
  fleet: FleetGates | null
  upstreams: Upstreams
} {
  const { config, redis } = core
  const fleet = redis
    ? createFleetGates(redis, {
        instance: core.instanceId,
        ttlMs: config.dispatch.leaseSeconds * 1000,
        logger: core.logger,
        prefix: `${config.redisPrefix}sem:`,
      })
    : null
  const upstreams = createUpstreams(config, core.telemetry, fleet?.gate, core.logger)
  return { fleet, upstreams }
}
