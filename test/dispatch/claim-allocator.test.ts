/**
 * The claim allocator (src/dispatch/claim-allocator.ts): earliest deadline first within an account,
 * round-robin between accounts, never more than the room under what the instance keeps in flight.
 */
import { describe, expect, test } from 'bun:test'
import { createClaimAllocator, spreadOverAccounts } from '../../src/dispatch/claim-allocator.ts'
import type { RunnableBatch } from '../../src/store/store.ts'

const batch = (
  id: string,
  accountId: string,
  deadlineAt: number,
  pending: number,
): RunnableBatch => ({
  id,
  accountId,
  createdAt: deadlineAt - 86_400,
  deadlineAt,
  endpoint: '/v1/chat/completions',
  pending,
  laneLines: false,
  running: 0,
})
const none = new Set<string>()
const claimed = (claims: { batch: RunnableBatch; count: number }[]) =>
  claims.map(({ batch, count }) => `${batch.id}:${count}`)

describe('claim allocator', () => {
  test('keeps half the slots again in flight, and claims only once a claim’s worth of room is free', () => {
    // 256 slots: 384 kept in flight, claims of at least 64.
    const allocator = createClaimAllocator({ capacity: 256 })
    const batches = [batch('b1', 'a1', 100, 10_000)]
    expect(claimed(allocator.allocate({ now: 0, batches, inFlight: 0, heldBack: none }))).toEqual([
      'b1:384',
    ])
    expect(claimed(allocator.allocate({ now: 0, batches, inFlight: 320, heldBack: none }))).toEqual(
      ['b1:64'],
    )
    expect(allocator.allocate({ now: 0, batches, inFlight: 321, heldBack: none })).toEqual([])
    expect(allocator.hasRoom(320)).toBe(true)
    expect(allocator.hasRoom(321)).toBe(false)
    expect(allocator.isFull(383)).toBe(false)
    expect(allocator.isFull(384)).toBe(true)
    // A small capacity claims in a quarter of its slots: 8 slots, 12 kept, claims of at least 2.
    const small = createClaimAllocator({ capacity: 8 })
    expect(small.hasRoom(10)).toBe(true)
    expect(small.hasRoom(11)).toBe(false)
  })

  test('within an account, the earliest deadline first, whatever the order the batches came in', () => {
    const allocator = createClaimAllocator({ capacity: 8 })
    const batches = [
      batch('late', 'a1', 300, 50),
      batch('soon', 'a1', 100, 5),
      batch('middle', 'a1', 200, 50),
    ]
    expect(claimed(allocator.allocate({ now: 0, batches, inFlight: 0, heldBack: none }))).toEqual([
      'soon:5',
      'middle:7',
    ])
  })

  test('batches due at the same second keep the order they came in', () => {
    const allocator = createClaimAllocator({ capacity: 8 })
    const batches = [batch('b2', 'a1', 100, 3), batch('b1', 'a1', 100, 50)]
    expect(claimed(allocator.allocate({ now: 0, batches, inFlight: 0, heldBack: none }))).toEqual([
      'b2:3',
      'b1:9',
    ])
  })

  test('a huge batch does not starve another account: each account an equal share, the first turn moving round', () => {
    const allocator = createClaimAllocator({ capacity: 64 })
    // 96 free lines over two accounts: 48 each, although a1's batch is due first and could take all.
    const batches = [
      batch('huge', 'a1', 100, 50_000),
      batch('small', 'a2', 200, 30),
      batch('other', 'a2', 300, 1000),
    ]
    const first = allocator.allocate({ now: 0, batches, inFlight: 0, heldBack: none })
    expect(claimed(first)).toEqual(['huge:48', 'small:30', 'other:18'])
    // The next allocation starts with the other account.
    const second = allocator.allocate({ now: 0, batches, inFlight: 0, heldBack: none })
    expect(claimed(second)).toEqual(['small:30', 'other:18', 'huge:48'])
    expect(second.reduce((sum, claim) => sum + claim.count, 0)).toBeLessThanOrEqual(96)
  })

  test('when the room does not cover a share for everyone, the account whose turn it is goes first', () => {
    // Three accounts, 2 free lines: shares of 1, the third account waits for the next turn.
    const accounts = [
      [batch('b1', 'a1', 1, 10)],
      [batch('b2', 'a2', 2, 10)],
      [batch('b3', 'a3', 3, 10)],
    ]
    expect(claimed(spreadOverAccounts(accounts, 2, 0))).toEqual(['b1:1', 'b2:1'])
    expect(claimed(spreadOverAccounts(accounts, 2, 1))).toEqual(['b2:1', 'b3:1'])
    expect(claimed(spreadOverAccounts(accounts, 2, 5))).toEqual(['b3:1', 'b1:1'])
  })

  test('an account that cannot use its share leaves the rest unclaimed; an empty batch is skipped', () => {
    const accounts = [
      [batch('b1', 'a1', 1, 0), batch('b2', 'a1', 2, 10)],
      [batch('b3', 'a2', 3, 200)],
    ]
    expect(claimed(spreadOverAccounts(accounts, 100, 0))).toEqual(['b2:10', 'b3:50'])
  })

  test('the accounts held back get nothing, and the turn does not move when nothing is left to claim', () => {
    const allocator = createClaimAllocator({ capacity: 8 })
    const batches = [batch('b1', 'a1', 100, 50), batch('b2', 'a2', 200, 50)]
    expect(
      claimed(allocator.allocate({ now: 0, batches, inFlight: 0, heldBack: new Set(['a1']) })),
    ).toEqual(['b2:12'])
    expect(
      allocator.allocate({ now: 0, batches, inFlight: 0, heldBack: new Set(['a1', 'a2']) }),
    ).toEqual([])
    expect(allocator.allocate({ now: 0, batches: [], inFlight: 0, heldBack: none })).toEqual([])
    // One allocation that served an account so far: this one starts with the second account.
    expect(claimed(allocator.allocate({ now: 0, batches, inFlight: 0, heldBack: none }))).toEqual([
      'b2:6',
      'b1:6',
    ])
  })

  test('an account due hours later comes after those due first, whatever the turn; room taken is told', () => {
    const allocator = createClaimAllocator({ capacity: 8 })
    const HOUR = 3600
    // a2's batch is due 71 hours after a1's: a1 first on every turn; a3 is due with a1 and takes turns.
    const batches = [
      batch('later', 'a2', 72 * HOUR, 50),
      batch('soon', 'a1', HOUR, 50),
      batch('soon-too', 'a3', HOUR + 60, 50),
    ]
    const room = new Map([
      ['soon', 3],
      ['soon-too', 3],
      ['later', 50],
    ])
    const told: string[] = []
    const allocate = () =>
      claimed(
        allocator.allocate({
          now: 0,
          batches,
          inFlight: 0,
          heldBack: none,
          room: (b) => room.get(b.id)!,
          took: (b, count) => told.push(`${b.id}:${count}`),
        }),
      )
    // The later account takes what the first ones leave, not an equal share beside them.
    expect(allocate()).toEqual(['soon:3', 'soon-too:3', 'later:6'])
    expect(allocate()).toEqual(['soon-too:3', 'soon:3', 'later:6'])
    expect(told).toEqual(['soon:3', 'soon-too:3', 'later:6', 'soon-too:3', 'soon:3', 'later:6'])
  })

  test("an account due first has its batches due later served after another account's due before them", () => {
    const HOUR = 3600
    // a1: due in 1 hour and in 72; a2: due in 3 hours. The order: a1's first, a2's, a1's last.
    const accounts = [
      [batch('x-soon', 'a1', HOUR, 5), batch('x-late', 'a1', 72 * HOUR, 50)],
      [batch('y-mid', 'a2', 3 * HOUR, 5)],
    ]
    expect(claimed(spreadOverAccounts(accounts, 100, 0))).toEqual([
      'x-soon:5',
      'y-mid:5',
      'x-late:50',
    ])
  })
})
