/**
 * The slot hand-over (src/upstream/slot-hand-over.ts) over a real provider gate: a whole 2xx
 * answer gives its slot to the next waiter at once, inside the call that reported it, and the
 * finishing call's own end then frees nothing, so the gate's bound holds.
 */
import { describe, expect, test } from 'bun:test'
import { createProviderGate } from '../../src/upstream/provider-gate.ts'
import { createSlotHandOver } from '../../src/upstream/slot-hand-over.ts'

describe('slot hand-over', () => {
  test('an answer hands its slot to the next waiter right there; the answered call then frees nothing', async () => {
    const gate = createProviderGate(1)
    const handOver = createSlotHandOver(gate)
    await gate.acquire()
    handOver.sent()
    const order: string[] = []
    const waiting = gate.acquire(undefined, () => order.push('granted'))
    handOver.answered()
    order.push('after answered')
    expect(order).toEqual(['granted', 'after answered'])
    await waiting
    handOver.sent()
    expect(gate.inFlight).toBe(1)
    handOver.ended() // the answered call ends: its slot is already the waiter's
    expect(gate.inFlight).toBe(1)
    handOver.ended()
    expect(gate.inFlight).toBe(0)
  })

  test('an answer with no sent call open hands nothing on (the bound is never raised)', async () => {
    const gate = createProviderGate(1)
    const handOver = createSlotHandOver(gate)
    handOver.answered()
    await gate.acquire()
    handOver.sent()
    handOver.answered()
    handOver.answered() // a second answer for the same one call: ignored
    expect(gate.inFlight).toBe(0)
    handOver.ended()
    expect(gate.inFlight).toBe(0)
    await gate.acquire()
    expect(gate.inFlight).toBe(1)
  })
})
