/**
 * The adaptive-concurrency controller (providers/adaptive-limit.ts), in virtual time: how it moves
 * on each signal, and that against a model replica (capacity C at a fixed latency, FIFO queue
 * behind) it settles near C with a short queue and follows a change of C.
 */
import { describe, expect, test } from 'bun:test'
import { createAdaptiveLimit, queueAllowance } from '../../providers/adaptive-limit.ts'

describe('adaptive limit: each signal', () => {
  test('slow start: +½ per uncongested answer with the limit in use, ×1.5 per round trip', () => {
    const limit = createAdaptiveLimit({ max: 100, initial: 4 })
    let now = 0
    for (const expected of [6, 9, 13, 20]) {
      const start = limit.limit
      now += 100
      for (let i = 0; i < start; i++) limit.answered(100, limit.limit, now)
      expect(limit.limit).toBe(expected)
    }
    // A queue reported at all ends it: one per round trip from there.
    limit.reported(1, now)
    const start = limit.limit
    for (let i = 0; i < start; i++) limit.answered(100, limit.limit, (now += 5))
    expect(limit.limit).toBe(start + 1)
  })

  test('an answer with the limit not in use does not raise it', () => {
    const limit = createAdaptiveLimit({ max: 100, initial: 4 })
    for (let i = 0; i < 50; i++) limit.answered(100, 2, i * 10)
    expect(limit.limit).toBe(4)
  })

  test('never above max_concurrency', () => {
    const limit = createAdaptiveLimit({ max: 6, initial: 4 })
    for (let i = 0; i < 50; i++) limit.answered(100, limit.limit, i * 10)
    expect(limit.limit).toBe(6)
  })

  test('busy (503/429) or a timeout cuts ×0.75, once per round trip, never below 1', () => {
    const limit = createAdaptiveLimit({ max: 100, initial: 40 })
    limit.answered(100, 1, 0)
    limit.congested(1_000)
    expect(limit.limit).toBe(30)
    // The other answers of the same overshoot, within one round trip (the 100 ms latency): no cut.
    limit.congested(1_050)
    expect(limit.limit).toBe(30)
    for (let i = 1; i <= 30; i++) limit.congested(1_000 + i * 200)
    expect(limit.limit).toBe(1)
  })

  test('after a cut it grows by one per round trip (no more slow start)', () => {
    const limit = createAdaptiveLimit({ max: 100, initial: 20 })
    limit.answered(100, 1, 0)
    limit.congested(1_000) // 15
    expect(limit.limit).toBe(15)
    let now = 2_000
    for (let trip = 0; trip < 3; trip++) {
      const start = limit.limit
      now += 100
      for (let i = 0; i < start; i++) limit.answered(100, limit.limit, now)
      expect(limit.limit).toBe(start + 1)
    }
  })

  test('latency well above the uncongested latency cuts; latency that holds does not', () => {
    const limit = createAdaptiveLimit({ max: 100, initial: 10 })
    let now = 0
    for (let i = 0; i < 10; i++) limit.answered(100, 1, (now += 10))
    expect(limit.limit).toBe(10)
    // Smoothed latency climbs past 2× 100 ms after a few slow answers.
    for (let i = 0; i < 10; i++) limit.answered(400, 1, (now += 10))
    expect(limit.limit).toBeLessThan(10)
  })

  test('a report of more waiting than the allowance cuts by the excess (between ×0.5 and ×0.9)', () => {
    const limit = createAdaptiveLimit({ max: 100, initial: 40 })
    limit.answered(100, 1, 0)
    expect(queueAllowance(40)).toBe(3)
    limit.reported(3, 1_000)
    expect(limit.limit).toBe(40)
    limit.reported(13, 2_000) // excess 10: 40 → 30
    expect(limit.limit).toBe(30)
    limit.reported(100, 3_000) // bounded at ×0.5
    expect(limit.limit).toBe(15)
    limit.reported(4, 4_000) // excess 2 of 15: at least ×0.9
    expect(limit.limit).toBe(13)
  })

  test('while the replica reports a queue at the allowance, it is not raised', () => {
    const limit = createAdaptiveLimit({ max: 100, initial: 8 })
    limit.reported(2, 0)
    for (let i = 0; i < 40; i++) limit.answered(100, limit.limit, 10 + i)
    expect(limit.limit).toBe(8)
    // The report goes stale (3 s by default): probing resumes.
    for (let i = 0; i < 8; i++) limit.answered(100, limit.limit, 5_000)
    expect(limit.limit).toBeGreaterThan(8)
  })
})

/**
 * A replica in virtual time: at most `capacity` running for `latencyMs` each, the rest waiting
 * FIFO; each answer carries the queue length (as vLLM's endpoint-load-metrics does). The client
 * keeps exactly `limit` calls in flight (the gate refills at once).
 */
function runReplica(phases: { capacity: number; ms: number }[], reports = true, latencyMs = 100) {
  const limit = createAdaptiveLimit({ max: 256 })
  let now = 0
  let capacity = phases[0].capacity
  const running: number[] = [] // finish times
  const waiting: number[] = [] // arrival order
  const series: { limit: number; waiting: number; done: number }[] = []
  let inFlight = 0
  const startWaiters = () => {
    while (running.length < capacity && waiting.length > 0) {
      waiting.shift()
      running.push(now + latencyMs)
    }
  }
  const sendAll = () => {
    while (inFlight < limit.limit) {
      inFlight++
      waiting.push(now)
      startWaiters()
    }
  }
  let end = 0
  for (const phase of phases) {
    capacity = phase.capacity
    startWaiters()
    end += phase.ms
    let phaseDone = 0
    let peakWaiting = 0
    while (now < end) {
      sendAll()
      running.sort((a, b) => a - b)
      const next = running.shift()!
      now = next
      inFlight--
      phaseDone++
      startWaiters()
      peakWaiting = Math.max(peakWaiting, waiting.length)
      // Latency seen: its time running plus its wait; approximate the wait from the queue.
      const wait = (waiting.length / capacity) * latencyMs
      if (reports) limit.reported(waiting.length, now)
      limit.answered(latencyMs + wait, inFlight + 1, now)
    }
    series.push({ limit: limit.limit, waiting: peakWaiting, done: phaseDone })
  }
  return series
}

describe('adaptive limit against a model replica (virtual time)', () => {
  test('settles at its capacity with a short queue, then follows it down and up', () => {
    // 100 ms per call; capacity 16 for 10 s, 8 for 10 s, 32 for 10 s.
    const phases = [
      { capacity: 16, ms: 10_000 },
      { capacity: 8, ms: 10_000 },
      { capacity: 32, ms: 10_000 },
    ]
    const series = runReplica(phases)
    for (const [i, phase] of phases.entries()) {
      const ideal = (phase.capacity / 100) * phase.ms
      // Throughput within 10% of capacity ÷ latency over each 10 s phase, transitions included.
      expect(series[i].done).toBeGreaterThanOrEqual(ideal * 0.9)
      // The working point ends near the capacity: at it, or above by the short queue it allows
      // (the allowance, plus the one that refills a finished call's place).
      const end = series[i].limit
      expect(end).toBeGreaterThanOrEqual(phase.capacity)
      expect(end).toBeLessThanOrEqual(phase.capacity + queueAllowance(end) + 1)
      // The queue stayed short all along, the overshoots of changes included.
      expect(series[i].waiting).toBeLessThanOrEqual(phase.capacity)
    }
  })
})

describe('adaptive limit from latency alone (a server with no load reports)', () => {
  test('reaches the capacity and keeps the queue under it, following a cut and a raise', () => {
    const phases = [
      { capacity: 16, ms: 10_000 },
      { capacity: 8, ms: 10_000 },
      { capacity: 24, ms: 10_000 },
    ]
    const series = runReplica(phases, false)
    for (const [i, phase] of phases.entries()) {
      expect(series[i].done).toBeGreaterThanOrEqual((phase.capacity / 100) * phase.ms * 0.9)
      // Latency may rise to 2× before it backs off: the queue is bounded by the capacity.
      expect(series[i].limit).toBeGreaterThanOrEqual(phase.capacity)
      expect(series[i].limit).toBeLessThanOrEqual(phase.capacity * 2)
    }
  })
})
