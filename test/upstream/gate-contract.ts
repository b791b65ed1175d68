/**
 * The one contract every provider concurrency gate runs (as test/store/<role>.test.ts is for each
 * store role): at most `limit` requests in flight, served in the order they asked, a waiter able to
 * give up, and nothing new sent while the provider has asked for a pause. The gates are made by
 * test/upstream/gates.ts; the test files that run this contract take their factory from there.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import type { MadeGate, MakeGate } from './gates.ts'

/** Rejects if `promise` has not settled within `ms`: no test waits on a gate for ever. */
function within<T>(ms: number, what: string, promise: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout>
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}

/** Whether `promise` is still pending after `ms`. */
async function stillWaiting(promise: Promise<unknown>, ms = 100) {
  let settled = false
  promise.then(
    () => (settled = true),
    () => (settled = true),
  )
  await Bun.sleep(ms)
  return !settled
}

export function runGateContract(name: string, make: MakeGate) {
  describe(`provider gate contract: ${name}`, () => {
    let made: MadeGate | null = null
    const start = async (limit: number) => (made = await make(limit)).gate

    afterEach(async () => {
      await made?.close()
      made = null
    })

    test('reports its limit; up to the limit are let in without any release', async () => {
      const gate = await start(3)
      expect(gate.limit).toBe(3)
      expect(gate.inFlight).toBe(0)
      await within(
        2_000,
        'three acquires',
        Promise.all([gate.acquire(), gate.acquire(), gate.acquire()]),
      )
      expect(gate.inFlight).toBe(3)
    })

    test('one past the limit waits until a release, then is let in', async () => {
      const gate = await start(2)
      await within(2_000, 'two acquires', Promise.all([gate.acquire(), gate.acquire()]))
      const third = gate.acquire()
      expect(await stillWaiting(third)).toBe(true)
      expect(gate.inFlight).toBe(2)
      gate.release()
      await within(2_000, 'the third after a release', third)
      expect(gate.inFlight).toBe(2)
    })

    test('waiters are let in in the order they asked', async () => {
      const gate = await start(1)
      await within(2_000, 'the first acquire', gate.acquire())
      const order: number[] = []
      const waiting = Array.from({ length: 5 }, (_, i) => gate.acquire().then(() => order.push(i)))
      for (let i = 0; i < 5; i++) {
        gate.release()
        await within(2_000, `waiter ${i}`, waiting[i])
      }
      expect(order).toEqual([0, 1, 2, 3, 4])
      expect(gate.inFlight).toBe(1)
    })

    test('under churn, never more than the limit in flight, and every request is let in', async () => {
      const gate = await start(4)
      let inUse = 0
      let peak = 0
      let served = 0
      const worker = async () => {
        for (let round = 0; round < 5; round++) {
          await gate.acquire()
          peak = Math.max(peak, ++inUse)
          await Bun.sleep(1)
          inUse--
          served++
          gate.release()
        }
      }
      await within(10_000, '150 requests', Promise.all(Array.from({ length: 30 }, worker)))
      expect(peak).toBe(4)
      expect(served).toBe(150)
      expect(gate.inFlight).toBe(0)
    })

    test("a waiter that gives up is rejected with its signal's reason, and its place goes to the next", async () => {
      const gate = await start(1)
      await within(2_000, 'the first acquire', gate.acquire())
      const abort = new AbortController()
      const givingUp = gate.acquire(abort.signal)
      const next = gate.acquire()
      abort.abort(new Error('cancelled by the client'))
      await expect(givingUp).rejects.toThrow('cancelled by the client')
      gate.release()
      await within(2_000, 'the next waiter', next)
      expect(gate.inFlight).toBe(1)
    })

    test('a signal already aborted while the slots are taken is refused at once, taking nothing', async () => {
      const gate = await start(1)
      await within(2_000, 'the first acquire', gate.acquire())
      const abort = new AbortController()
      abort.abort(new Error('gone'))
      await expect(gate.acquire(abort.signal)).rejects.toThrow('gone')
      gate.release()
      expect(gate.inFlight).toBe(0)
    })

    test('after pause(until), nothing new is let in before `until`, free slots or not; then the waiters are', async () => {
      const gate = await start(2)
      await within(2_000, 'the first acquire', gate.acquire())
      const pauseMs = 200
      const started = Date.now()
      gate.pause(started + pauseMs)
      // One waiting for a slot freed during the pause, one for a slot that was free all along.
      const afterRelease = gate.acquire().then(() => Date.now() - started)
      const onFreeSlot = gate.acquire().then(() => Date.now() - started)
      gate.release()
      const waited = await within(
        pauseMs + 3_000,
        'the waiters after the pause',
        Promise.all([afterRelease, onFreeSlot]),
      )
      for (const ms of waited) expect(ms).toBeGreaterThanOrEqual(pauseMs - 5)
      expect(gate.inFlight).toBe(2)
    })

    test('a shorter pause asked later does not cut a longer one short', async () => {
      const gate = await start(1)
      const started = Date.now()
      gate.pause(started + 300)
      gate.pause(started + 30)
      const waited = await within(
        3_300,
        'the acquire after the pause',
        gate.acquire().then(() => Date.now() - started),
      )
      expect(waited).toBeGreaterThanOrEqual(295)
    })
  })
}
