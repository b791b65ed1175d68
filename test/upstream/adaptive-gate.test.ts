/**
 * The gate of a provider with adaptive concurrency (src/upstream/adaptive-gate.ts): it keeps the
 * provider gate contract in front of the in-process gate and in front of the fleet-wide one (with
 * TEST_REDIS_URL), and lets through no more than the working limit, serving waiters once it grows.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import Redis from 'ioredis'
import { createAdaptiveGate } from '../../src/upstream/adaptive-gate.ts'
import { createProviderGate } from '../../src/upstream/provider-gate.ts'
import { createLogger } from '../../src/telemetry/logger.ts'
import { TEST_REDIS_URL } from '../helpers/gateway.ts'
import { runGateContract } from './gate-contract.ts'
import { adaptiveOver, fleetGateMaker, makeInProcessGate } from './gates.ts'

runGateContract('adaptive, in front of the in-process gate', adaptiveOver(makeInProcessGate))

if (TEST_REDIS_URL) {
  const redisUrl = TEST_REDIS_URL
  const prefix = `mgt:adaptive-${randomBytes(4).toString('hex')}:`
  const logger = createLogger('warn', () => {})
  runGateContract(
    'adaptive, in front of the fleet gate',
    adaptiveOver(fleetGateMaker({ redisUrl, prefix, logger })),
  )
  afterAll(async () => {
    const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
    redis.on('error', () => {})
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
  })
}

describe('the working limit', () => {
  test('bounds what is in flight below max_concurrency; a raise and serve() lets the waiters in', async () => {
    let working = 2
    const gate = createAdaptiveGate(createProviderGate(10), () => working)
    expect(gate.limit).toBe(10)
    const granted: number[] = []
    const all = Array.from({ length: 5 }, (_, i) => gate.acquire(undefined, () => granted.push(i)))
    await Bun.sleep(10)
    expect(granted).toEqual([0, 1])
    expect(gate.inFlight).toBe(2)
    working = 4
    gate.serve()
    await Bun.sleep(10)
    expect(granted).toEqual([0, 1, 2, 3])
    // A cut lets the running finish and holds the rest until in flight is under it.
    working = 2
    gate.release()
    gate.release()
    await Bun.sleep(10)
    expect(granted).toEqual([0, 1, 2, 3])
    gate.release()
    await Bun.sleep(10)
    expect(granted).toEqual([0, 1, 2, 3, 4])
    expect(gate.inFlight).toBe(2)
    await Promise.all(all)
  })
})
