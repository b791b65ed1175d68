/**
 * The provider gate contract on the fleet-wide gate, when TEST_REDIS_URL names a Redis (skipped
 * otherwise). Its keys live under a prefix of this file's own, deleted at the end.
 */
import { afterAll, afterEach, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import Redis from 'ioredis'
import { createLogger } from '../../src/telemetry/logger.ts'
import { TEST_REDIS_URL } from '../helpers/gateway.ts'
import { runGateContract } from './gate-contract.ts'
import { fleetGateMaker } from './gates.ts'

if (!TEST_REDIS_URL) {
  describe('provider gate contract: fleet', () => {
    test.skip('needs TEST_REDIS_URL, e.g. redis://127.0.0.1:6379', () => {})
  })
} else {
  const redisUrl = TEST_REDIS_URL
  const prefix = `mgt:gates-${randomBytes(4).toString('hex')}:`
  const warnings: string[] = []
  const logger = createLogger('warn', (line) => warnings.push(line))

  // A gate that lost Redis falls back to counting in process and would pass unseen: it logs.
  afterEach(() => {
    expect(warnings).toEqual([])
  })

  afterAll(async () => {
    const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 })
    redis.on('error', () => {})
    const keys = await redis.keys(`${prefix}*`)
    if (keys.length > 0) await redis.del(...keys)
    redis.disconnect()
  })

  runGateContract('fleet', fleetGateMaker({ redisUrl, prefix, logger }))
}
