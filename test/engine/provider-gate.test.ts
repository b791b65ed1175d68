/**
 * The provider gate's hand-over (src/upstream/provider-gate.ts): a waiter's `granted` runs inside
 * the release() that frees its slot, so the request it starts can take the connection that just
 * answered; never past the bound, never during a pause, never for a waiter that gave up.
 */
import { describe, expect, test } from 'bun:test'
import { createProviderGate } from '../../src/upstream/provider-gate.ts'

describe('provider gate', () => {
  test('granted runs at once when a slot is free, and inside the release that frees one otherwise', async () => {
    const gate = createProviderGate(1)
    const order: string[] = []
    const first = gate.acquire(undefined, () => order.push('first granted'))
    expect(order).toEqual(['first granted'])
    const second = gate.acquire(undefined, () => order.push('second granted'))
    await first
    expect(gate.inFlight).toBe(1)
    expect(order).toEqual(['first granted'])
    gate.release()
    // Before release() returned, not a microtask later.
    expect(order).toEqual(['first granted', 'second granted'])
    expect(gate.inFlight).toBe(1)
    await second
  })

  test('never more than the limit granted, in the order they asked', async () => {
    const gate = createProviderGate(2)
    const granted: number[] = []
    const waits = Array.from({ length: 5 }, (_, i) =>
      gate.acquire(undefined, () => granted.push(i)),
    )
    expect(granted).toEqual([0, 1])
    gate.release()
    expect(granted).toEqual([0, 1, 2])
    gate.release()
    gate.release()
    expect(granted).toEqual([0, 1, 2, 3, 4])
    expect(gate.inFlight).toBe(2)
    await Promise.all(waits)
  })

  test('a paused gate grants nothing on release until the pause ends', async () => {
    let now = 1_000
    const gate = createProviderGate(1, () => now)
    await gate.acquire()
    const granted: string[] = []
    const waiting = gate.acquire(undefined, () => granted.push('after pause'))
    gate.pause(now + 40)
    gate.release()
    expect(granted).toEqual([])
    now += 40
    await waiting
    expect(granted).toEqual(['after pause'])
  })

  test('a waiter that gave up is never granted, and its place goes to the next', async () => {
    const gate = createProviderGate(1)
    await gate.acquire()
    const abort = new AbortController()
    const granted: string[] = []
    const givenUp = gate.acquire(abort.signal, () => granted.push('gave up'))
    const next = gate.acquire(undefined, () => granted.push('next'))
    abort.abort(new Error('cancelled'))
    await expect(givenUp).rejects.toThrow('cancelled')
    gate.release()
    expect(granted).toEqual(['next'])
    await next
  })
})
