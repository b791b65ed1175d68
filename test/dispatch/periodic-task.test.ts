/**
 * The periodic task (src/dispatch/periodic-task.ts) behind the dispatcher's heartbeat, reaper and
 * maintenance: every N ms, never two runs at once, early on `soon()`, nothing once stopped.
 * Real timers, short intervals; every wait is bounded.
 */
import { describe, expect, test } from 'bun:test'
import { createPeriodicTask } from '../../src/dispatch/periodic-task.ts'
import { waitFor } from '../helpers/wait.ts'

const noErrors = (error: Error) => {
  throw error
}

describe('periodic task', () => {
  test('runs every interval once started, and not before', async () => {
    let runs = 0
    const task = createPeriodicTask(async () => runs++, {
      everyMs: 20,
      earlyGapMs: 5,
      onError: noErrors,
    })
    await Bun.sleep(60)
    expect(runs).toBe(0)
    task.start()
    await Bun.sleep(150)
    task.stop()
    // About 7 runs; a loaded machine delays timers, so bounds rather than an exact count.
    expect(runs).toBeGreaterThanOrEqual(3)
    expect(runs).toBeLessThanOrEqual(8)
  })

  test('a run slower than the interval is never joined by a second one', async () => {
    let running = 0
    let most = 0
    let runs = 0
    const task = createPeriodicTask(
      async () => {
        running++
        most = Math.max(most, running)
        runs++
        await Bun.sleep(45)
        running--
      },
      { everyMs: 10, earlyGapMs: 0, onError: noErrors },
    )
    task.start()
    for (let i = 0; i < 20; i++) {
      task.soon()
      await Bun.sleep(10)
    }
    task.stop()
    await Bun.sleep(60)
    expect(most).toBe(1)
    expect(runs).toBeGreaterThanOrEqual(2)
  })

  test('soon() runs it at once instead of an interval later, at most every early gap', async () => {
    const times: number[] = []
    const task = createPeriodicTask(async () => times.push(performance.now()), {
      everyMs: 10_000,
      earlyGapMs: 300,
      onError: noErrors,
    })
    task.start()
    const asked = performance.now()
    task.soon()
    await waitFor('the early run', async () => times.length === 1, 2000, 1)
    expect(times[0] - asked).toBeLessThan(1000)
    // Asked again at once: it waits for the gap since the last run, and many asks make one run.
    task.soon()
    task.soon()
    task.soon()
    await Bun.sleep(20)
    expect(times.length).toBe(1)
    await waitFor('the second early run', async () => times.length === 2, 3000, 5)
    await Bun.sleep(50)
    task.stop()
    expect(times.length).toBe(2)
    expect(times[1] - times[0]).toBeGreaterThanOrEqual(299)
  })

  test('soon() during a run makes one more run right after it', async () => {
    let runs = 0
    let release: () => void = () => {}
    const task = createPeriodicTask(
      async () => {
        runs++
        if (runs === 1) await new Promise<void>((resolve) => (release = resolve))
      },
      { everyMs: 10_000, earlyGapMs: 0, onError: noErrors },
    )
    task.start()
    task.soon()
    await waitFor('the first run', async () => runs === 1, 2000, 1)
    task.soon()
    task.soon()
    await Bun.sleep(20)
    expect(runs).toBe(1)
    release()
    await waitFor('the run asked for during the first', async () => runs === 2, 2000, 1)
    await Bun.sleep(30)
    task.stop()
    expect(runs).toBe(2)
  })

  test('a run that resolves true asks for the next one itself', async () => {
    let runs = 0
    // Three steps, each taken the moment the one before is done, long before the interval.
    const task = createPeriodicTask(async () => ++runs < 3, {
      everyMs: 10_000,
      earlyGapMs: 1,
      onError: noErrors,
    })
    task.start()
    task.soon()
    await waitFor('three runs', async () => runs === 3, 2000, 1)
    await Bun.sleep(30)
    task.stop()
    expect(runs).toBe(3)
  })

  test('a run that fails is reported and the schedule goes on', async () => {
    const errors: string[] = []
    let runs = 0
    const task = createPeriodicTask(
      async () => {
        runs++
        throw new Error(`failure ${runs}`)
      },
      { everyMs: 15, earlyGapMs: 0, onError: (error) => errors.push(error.message) },
    )
    task.start()
    await Bun.sleep(100)
    task.stop()
    expect(runs).toBeGreaterThanOrEqual(2)
    expect(errors.slice(0, 2)).toEqual(['failure 1', 'failure 2'])
  })

  test('once stopped nothing runs: not the interval, not soon(), not a run asked for before the stop', async () => {
    let runs = 0
    const task = createPeriodicTask(async () => runs++, {
      everyMs: 20,
      earlyGapMs: 1000,
      onError: noErrors,
    })
    // Before start() an ask does nothing.
    task.soon()
    await Bun.sleep(20)
    expect(runs).toBe(0)
    task.start()
    task.soon()
    await waitFor('the early run', async () => runs >= 1, 2000, 1)
    // An early run scheduled (the gap is not over) and then the stop.
    task.soon()
    task.stop()
    const atStop = runs
    task.soon()
    task.start()
    await Bun.sleep(120)
    expect(runs).toBe(atStop)
  })

  test('a run that resolves true is followed after chainGapMs, not the early gap', async () => {
    // Early gap of 10 s, interval of 1 s: three runs within one interval come from the chain.
    const times: number[] = []
    const task = createPeriodicTask(async () => times.push(performance.now()) < 3, {
      everyMs: 1000,
      earlyGapMs: 10_000,
      chainGapMs: 0,
      onError: noErrors,
    })
    task.start()
    await waitFor('three runs', async () => times.length >= 3, 3000, 5)
    task.stop()
    expect(times[2]! - times[0]!).toBeLessThan(1000)
  })
})
