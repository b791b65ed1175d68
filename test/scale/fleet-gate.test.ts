/**
 * The fleet-wide provider gate on a real Redis, several "instances" in this process: the bound
 * holds across them, a newcomer gets its share from an instance that took everything, a crashed
 * instance's slots come back after the TTL, and Redis is called per block, not per request.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import Redis from 'ioredis'
import { connectRedis } from '../../src/coordination/redis.ts'
import {
  createFleetGate,
  createFleetGates,
  type FleetGates,
} from '../../src/upstream/fleet-gate.ts'
import { defineSlotScripts, redisSlots } from '../../src/upstream/redis-slots.ts'
import { createLogger } from '../../src/telemetry/logger.ts'
import { TEST_REDIS_URL } from '../helpers/gateway.ts'
import { waitFor } from '../helpers/wait.ts'

const logger = createLogger('silent')
const redisUrl = TEST_REDIS_URL ?? ''

if (!redisUrl) {
  describe('fleet gate', () => {
    test.skip('needs TEST_REDIS_URL, e.g. redis://127.0.0.1:6379', () => {})
  })
} else {
  const prefix = `mgt:gate:${Math.random().toString(36).slice(2)}:`
  const fleets: FleetGates[] = []
  // Each instance on a connection of its own, as separate processes would be.
  const connections: Redis[] = []
  const connect = async () => {
    const redis = await connectRedis(redisUrl)
    connections.push(redis)
    return redis
  }
  const instances = (count: number, ttlMs = 3000) =>
    Promise.all(
      Array.from({ length: count }, async (_, i) => {
        // Named before the connection is awaited: names taken after it could repeat.
        const instance = `i${fleets.length + i}`
        const fleet = createFleetGates(await connect(), { instance, ttlMs, logger, prefix })
        fleets.push(fleet)
        return fleet
      }),
    )
  afterAll(async () => {
    await Promise.all(fleets.map((fleet) => fleet.close()))
    for (const redis of connections) redis.disconnect()
  })

  describe('fleet gate', () => {
    test('three instances never hold more than the limit between them, and each is served', async () => {
      const gates = (await instances(3)).map((fleet) => fleet.gate('bound', 24))
      let inUse = 0
      let peak = 0
      const served = [0, 0, 0]
      await Promise.all(
        gates.flatMap((gate, g) =>
          Array.from({ length: 40 }, async () => {
            for (let k = 0; k < 20; k++) {
              await gate.acquire()
              peak = Math.max(peak, ++inUse)
              served[g]++
              await Bun.sleep(2)
              inUse--
              gate.release()
            }
          }),
        ),
      )
      expect(peak).toBe(24)
      expect(served).toEqual([800, 800, 800])
      // Slots are taken in blocks of limit ÷ 8: a few dozen round trips for 2,400 requests.
      const calls = gates.reduce((sum, gate) => sum + gate.redisCalls, 0)
      expect(calls).toBeLessThan(240)
    })

    test('an instance holding every slot gives the newcomers their share within a second', async () => {
      const [first, second] = (await instances(2)).map((fleet) => fleet.gate('share', 16))
      let stop = false
      const busy = (gate: typeof first) =>
        Array.from({ length: 32 }, async () => {
          while (!stop) {
            await gate.acquire()
            await Bun.sleep(5)
            gate.release()
          }
        })
      const workers = busy(first)
      try {
        await waitFor('the first to hold everything', async () => first.held === 16, 5_000, 10)
        workers.push(...busy(second))
        const started = Date.now()
        await waitFor('a fair split', async () => second.held === 8 && first.held === 8, 5_000, 10)
        expect(Date.now() - started).toBeLessThan(1_500)
      } finally {
        stop = true
        await Promise.all(workers)
      }
    })

    test('the slots of an instance that stopped renewing them come back after the TTL', async () => {
      // A "crashed" instance: slots taken, then no heartbeat and no release.
      const redis = new Redis(redisUrl)
      defineSlotScripts(redis)
      const health = { degraded: false, ok() {}, failed() {} }
      const dead = createFleetGate(
        {
          slots: redisSlots(redis, {
            prefix,
            provider: 'crash',
            instance: 'dead',
            limit: 8,
            ttlMs: 1000,
          }),
          health,
        },
        { limit: 8 },
      )
      await Promise.all(Array.from({ length: 8 }, () => dead.acquire()))
      expect(dead.held).toBe(8)
      const [alive] = (await instances(1, 1000)).map((fleet) => fleet.gate('crash', 8))
      const started = Date.now()
      await alive.acquire()
      const waited = Date.now() - started
      expect(waited).toBeGreaterThanOrEqual(700)
      expect(waited).toBeLessThan(3_000)
      alive.release()
      redis.disconnect()
    })
  })
}
