/**
 * Whose job a free schema thread starts next (src/schemas/schema-turns.ts), without threads: the
 * jobs are strings, the clock is passed in.
 */
import { describe, expect, test } from 'bun:test'
import { createTurns, SLOW_MEMORY_MS } from '../../src/schemas/schema-turns.ts'

function turnsOf(threads: number) {
  let clock = 0
  const turns = createTurns<string>({ threads, slowMs: 100, now: () => clock })
  return {
    turns,
    advance: (ms: number) => (clock += ms),
    /** Fills `idle` free threads until the turns hand out no more, as the threads' pump does. */
    takeAll(idle: number) {
      const taken: string[] = []
      while (taken.length < idle) {
        const job = turns.take()
        if (job === null) break
        taken.push(job)
      }
      return taken
    },
  }
}

describe('schema turns', () => {
  test('an owner alone with quick jobs uses every thread', () => {
    const { turns, takeAll } = turnsOf(2)
    for (const job of ['a1', 'a2', 'a3']) turns.push('a', job)
    expect(takeAll(2)).toEqual(['a1', 'a2'])
    turns.finished('a', 1)
    expect(takeAll(1)).toEqual(['a3'])
  })

  test("while another owner's job waits, no owner starts a job on the last thread", () => {
    const { turns, takeAll } = turnsOf(2)
    for (const job of ['a1', 'a2', 'a3']) turns.push('a', job)
    expect(takeAll(2)).toEqual(['a1', 'a2'])
    turns.push('b', 'b1')
    // a1 ends: its thread goes to b, though a's turn came first.
    turns.finished('a', 1)
    expect(takeAll(1)).toEqual(['b1'])
    turns.finished('b', 1)
    expect(takeAll(1)).toEqual(['a3'])
  })

  test('an owner whose job held a thread for slowMs keeps a thread free, for SLOW_MEMORY_MS', () => {
    const { turns, takeAll, advance } = turnsOf(2)
    for (const job of ['a1', 'a2', 'a3', 'a4']) turns.push('a', job)
    expect(takeAll(2)).toEqual(['a1', 'a2'])
    turns.finished('a', 100)
    // Alone, yet held to one thread: the other stays idle for whoever comes.
    expect(takeAll(1)).toEqual([])
    turns.push('b', 'b1')
    expect(takeAll(1)).toEqual(['b1'])
    turns.finished('b', 1)
    expect(takeAll(1)).toEqual([])
    turns.push('b', 'b2')
    expect(takeAll(1)).toEqual(['b2'])
    turns.finished('b', 1)
    // Its slow job over, still one thread at a time.
    turns.finished('a', 1)
    expect(takeAll(2)).toEqual(['a3'])
    turns.finished('a', 1)
    expect(takeAll(2)).toEqual(['a4'])
    turns.finished('a', 1)
    // Remembered after its work has drained, and forgotten SLOW_MEMORY_MS after its slow job.
    turns.push('a', 'a5')
    turns.push('a', 'a6')
    expect(takeAll(2)).toEqual(['a5'])
    advance(SLOW_MEMORY_MS)
    expect(takeAll(1)).toEqual(['a6'])
  })

  test('with one thread owners only take turns', () => {
    const { turns, takeAll } = turnsOf(1)
    for (const job of ['a1', 'a2', 'a3']) turns.push('a', job)
    expect(takeAll(1)).toEqual(['a1'])
    turns.push('b', 'b1')
    turns.finished('a', 100)
    expect(takeAll(1)).toEqual(['a2'])
    turns.finished('a', 100)
    expect(takeAll(1)).toEqual(['b1'])
    turns.finished('b', 1)
    expect(takeAll(1)).toEqual(['a3'])
  })

  test('drain hands back the waiting jobs, and later endings are ignored', () => {
    const { turns, takeAll } = turnsOf(2)
    for (const job of ['a1', 'a2', 'a3']) turns.push('a', job)
    turns.push('b', 'b1')
    expect(takeAll(2)).toEqual(['a1', 'b1'])
    expect(turns.drain().sort()).toEqual(['a2', 'a3'])
    turns.finished('a', 1)
    expect(takeAll(2)).toEqual([])
  })
})
