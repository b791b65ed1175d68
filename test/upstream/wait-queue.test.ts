/**
 * Where a caller waits for a provider's slot (src/upstream/wait-queue.ts): live calls first, in
 * the order they came; an account's batch lines by their deadline, within the positions its lines
 * hold, so one account's lines never pass another's.
 */
import { expect, test } from 'bun:test'
import { waitInQueue, type Waiter } from '../../src/upstream/wait-queue.ts'

test('live calls first; an account’s lines due earlier first, in its own positions only', async () => {
  const waiters: Waiter[] = []
  const served: string[] = []
  const wait = (name: string, place?: { account: string; deadlineMs: number }) =>
    void waitInQueue(waiters, undefined, () => {}, { place }).then(() => served.push(name))
  wait('a-72h-1', { account: 'a', deadlineMs: 72 })
  wait('b-24h-1', { account: 'b', deadlineMs: 24 })
  wait('a-72h-2', { account: 'a', deadlineMs: 72 })
  wait('live-1')
  wait('b-24h-2', { account: 'b', deadlineMs: 24 })
  wait('a-24h-1', { account: 'a', deadlineMs: 24 })
  wait('live-2')
  for (const waiter of [...waiters]) {
    waiters.shift()
    waiter()
  }
  await Promise.resolve()
  expect(served).toEqual([
    'live-1',
    'live-2',
    // a's positions (1st, 3rd, 6th of the lines) now hold its 24-hour line first.
    'a-24h-1',
    'b-24h-1',
    'a-72h-1',
    'b-24h-2',
    'a-72h-2',
  ])
})
