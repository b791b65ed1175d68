/**
 * The planner's room (src/dispatch/spill-planner.ts): how many more of a batch's lines the claim
 * allocator may claim, read off the offering its next line would go to.
 */
import { expect, test } from 'bun:test'
import { createSpillPlanner } from '../../src/dispatch/spill-planner.ts'

const NOW = 1_000_000
const batch = { id: 'batch_a', createdAt: NOW / 1000, deadlineAt: NOW / 1000 + 3600 }

function planner(limits: Record<string, number>, down: Set<string> = new Set()) {
  return createSpillPlanner({
    marginShare: 0.1,
    available: (provider) => !down.has(provider),
    unreachable: (provider) => down.has(provider),
    limit: (provider) => limits[provider]!,
  })
}

test('a batch not planned yet has no room of its own: null', () => {
  expect(planner({ pool: 2 }).room(batch, 10, NOW)).toBeNull()
})

test("the room is the offering's slots and one round waiting, less every batch's lines there", () => {
  const spill = planner({ pool: 4 })
  spill.choose(batch, ['pool'], 10, NOW)
  expect(spill.room(batch, 10, NOW)).toBe(8)
  for (let i = 0; i < 3; i++) spill.enter(batch.id, 'pool')
  spill.enter('batch_other', 'pool')
  expect(spill.room(batch, 10, NOW)).toBe(4)
  // Under half a round: none, until a round is free to claim at once.
  spill.enter('batch_other', 'pool')
  spill.enter('batch_other', 'pool')
  spill.enter('batch_other', 'pool')
  expect(spill.room(batch, 10, NOW)).toBe(0)
  spill.leave('batch_other', 'pool')
  expect(spill.room(batch, 10, NOW)).toBe(2)
})

test('every provider of its lines down: 0', () => {
  const spill = planner({ pool: 4 }, new Set(['pool']))
  spill.choose(batch, ['pool'], 10, NOW)
  expect(spill.room(batch, 10, NOW)).toBe(0)
})

test("a batch of two models: what both models' offerings take, one of them down or not", () => {
  const down = new Set<string>()
  const spill = planner({ a: 4, b: 16 }, down)
  spill.choose(batch, ['b'], 10, NOW)
  spill.choose(batch, ['a'], 10, NOW)
  expect(spill.room(batch, 10, NOW)).toBe(32 + 8)
  // The model chosen for last is on the provider that went down: the other's room still counts.
  down.add('b')
  expect(spill.room(batch, 10, NOW)).toBe(8)
  down.add('a')
  expect(spill.room(batch, 10, NOW)).toBe(0)
})

test('lines routed every which way (more than 8 lists): no room of its own', () => {
  const limits: Record<string, number> = {}
  for (let i = 0; i < 10; i++) limits[`p${i}`] = 1
  const spill = planner(limits)
  for (let i = 0; i < 8; i++) spill.choose(batch, [`p${i}`], 10, NOW)
  expect(spill.room(batch, 10, NOW)).toBe(8 * 2)
  spill.choose(batch, ['p8'], 10, NOW)
  expect(spill.room(batch, 10, NOW)).toBeNull()
})

test("past the cheap offering's room: the offering a spill goes to adds its room, only when the batch must spill", () => {
  const room = (deadlineS: number) => {
    const spill = planner({ pool: 5, paid: 64 })
    const due = { id: 'batch_due', createdAt: 0, deadlineAt: deadlineS }
    let now = 0
    // Five lines in the pool's slots for 3.6 s each, again and again: its rate, 1.39 lines/s.
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < 5; i++) {
        spill.choose(due, ['pool', 'paid'], 20_000, now)
        spill.enter(due.id, 'pool')
        spill.started(due.id, 'pool', now)
      }
      now += 3_600
      for (let i = 0; i < 5; i++) {
        spill.ended(due.id, 'pool', { nowMs: now, serviceMs: 3_600, ok: true })
        spill.leave(due.id, 'pool')
      }
    }
    for (let i = 0; i < 7; i++) spill.enter(due.id, 'pool')
    return spill.room(due, 20_000, now)
  }
  // 20,000 lines at 1.39 a second need 4 hours: in 2 the rest spills, and is claimed to.
  expect(room(2 * 3600)).toBe(3 + 128)
  // In 8 the pool finishes them: its own room alone.
  expect(room(8 * 3600)).toBe(3)
})

test('room given to one batch in an allocation is not given again to the next on the same offering', () => {
  const spill = planner({ pool: 4, paid: 16 })
  const other = { ...batch, id: 'batch_b' }
  const elsewhere = { ...batch, id: 'batch_c' }
  spill.choose(batch, ['pool'], 10, NOW)
  spill.choose(other, ['pool'], 10, NOW)
  spill.choose(elsewhere, ['paid'], 10, NOW)
  const taken = new Map<string, number>()
  expect(spill.room(batch, 10, NOW, taken)).toBe(8)
  spill.take(batch, 5, { unsent: 10, nowMs: NOW }, taken)
  expect(spill.room(other, 10, NOW, taken)).toBe(3)
  spill.take(other, 2, { unsent: 10, nowMs: NOW }, taken)
  // 1 left at the pool: under half its slots, so none for a batch after them there.
  expect(spill.room(batch, 10, NOW, taken)).toBe(0)
  // Another offering's room is its own.
  expect(spill.room(elsewhere, 10, NOW, taken)).toBe(32)
  // Without the allocation's tally, each batch sees the pool's whole room, as before.
  expect(spill.room(other, 10, NOW)).toBe(8)
})
