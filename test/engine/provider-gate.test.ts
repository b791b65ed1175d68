/**
 * The in-process provider gate (src/upstream/provider-gate.ts): never past the bound, served in
 * the order they asked, nothing during a pause, never a waiter that gave up.
 */
import { describe, expect, test } from 'bun:test'
import { createProviderGate } from '../../src/upstream/provider-gate.ts'

/** Lets the promise callbacks of a release run. */
const settle = () => new Promise((resolve) => setImmediate(resolve))

describe('provider gate', () => {
  test('never more than the limit let in, in the order they asked', async () => {
    const gate = createProviderGate(2)
    const granted: number[] = []
    const waits = Array.from({ length: 5 }, (_, i) => gate.acquire().then(() => granted.push(i)))
    await settle()
    expect(granted).toEqual([0, 1])
    gate.release()
    await settle()
    expect(granted).toEqual([0, 1, 2])
    gate.release()
    gate.release()
    await settle()
    expect(granted).toEqual([0, 1, 2, 3, 4])
    expect(gate.inFlight).toBe(2)
    await Promise.all(waits)
  })

  test('a paused gate lets nothing in on release until the pause ends', async () => {
    let now = 1_000
    const gate = createProviderGate(1, () => now)
    await gate.acquire()
    const granted: string[] = []
    const waiting = gate.acquire().then(() => granted.push('after pause'))
    gate.pause(now + 40)
    gate.release()
    await settle()
    expect(granted).toEqual([])
    now += 40
    await waiting
    expect(granted).toEqual(['after pause'])
  })

  test('a waiter that gave up is never let in, and its place goes to the next', async () => {
    const gate = createProviderGate(1)
    await gate.acquire()
    const abort = new AbortController()
    const granted: string[] = []
    const givenUp = gate.acquire(abort.signal).then(() => granted.push('gave up'))
    const next = gate.acquire().then(() => granted.push('next'))
    abort.abort(new Error('cancelled'))
    await expect(givenUp).rejects.toThrow('cancelled')
    gate.release()
    await next
    expect(granted).toEqual(['next'])
    expect(gate.inFlight).toBe(1)
  })
})
