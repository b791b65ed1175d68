/**
 * The replica pool with adaptive concurrency (providers/pool.ts): calls go to the healthy replica
 * with the most room under its working point, the provider's working limit is the sum of the
 * points, a busy call is offered another replica only where there is room, and the gate is told
 * when the limit grew. No call is made here: the replicas' addresses answer nothing.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import {
  createReplicaPool,
  type ReplicaPool,
  type ReplicaPoolOptions,
} from '../../providers/pool.ts'

const nowhere = ['http://127.0.0.1:9/v1', 'http://127.0.0.1:10/v1']
/** Replicas at addresses that answer nothing (two unless told), with `adaptive` as given. */
const poolOf = (adaptive?: ReplicaPoolOptions['adaptive'], baseUrls = nowhere) =>
  createReplicaPool({
    baseUrls,
    connections: 4,
    timeoutMs: 1_000,
    probePath: '/models',
    probeHeaders: {},
    adaptive,
  })

describe('adaptive replica pool', () => {
  let pool: ReplicaPool | null = null
  afterEach(async () => {
    await pool?.close()
    pool = null
  })

  test('spreads by room under each working point; the working limit is their sum', () => {
    pool = poolOf({ maxConcurrency: 64 })
    expect(pool.adaptive).toBe(true)
    expect(pool.workingLimit()).toBe(8) // two replicas starting at 4
    const taken = Array.from({ length: 8 }, () => pool!.acquire())
    expect(taken.filter((r) => r.baseUrl === nowhere[0])).toHaveLength(4)
    expect(taken.filter((r) => r.baseUrl === nowhere[1])).toHaveLength(4)
    // Both full: a busy call is not pushed onto the other.
    expect(pool.another([taken[0]])).toBeNull()
    for (const replica of taken) pool.release(replica, 'neutral')
    expect(pool.workingPoints()).toEqual({ [nowhere[0]]: 4, [nowhere[1]]: 4 })
  })

  test('answers with the limit in use raise the working point and tell the gate; busy cuts it', () => {
    let changes = 0
    let now = 1_000
    pool = poolOf(
      { maxConcurrency: 64, onChange: () => changes++, now: () => now },
      nowhere.slice(0, 1),
    )
    // Kept full: each answer ends with the limit in use, +½ each (slow start).
    const calls = Array.from({ length: 4 }, () => pool!.acquire())
    for (let i = 0; i < 4; i++) {
      pool.release(calls.pop()!, 'ok', { latencyMs: 100, waiting: 0 })
      while (calls.length < pool.workingLimit()) calls.push(pool.acquire())
    }
    expect(pool.workingLimit()).toBe(6)
    expect(changes).toBe(2)
    for (const replica of calls) pool.release(replica, 'neutral')
    const before = pool.workingLimit()
    now += 1_000
    pool.release(pool.acquire(), 'neutral', 'congested')
    expect(pool.workingLimit()).toBe(Math.max(1, Math.floor(before * 0.75)))
  })

  test('without adaptive concurrency the pool has no working limit and another() is any healthy untried replica', () => {
    pool = poolOf()
    expect(pool.adaptive).toBe(false)
    expect(pool.workingLimit()).toBe(Number.POSITIVE_INFINITY)
    expect(pool.workingPoints()).toEqual({})
    const first = pool.acquire()
    const other = pool.another([first])!
    expect(other.baseUrl).not.toBe(first.baseUrl)
    expect(pool.another([first, other])).toBeNull()
    pool.release(first, 'neutral')
    pool.release(other, 'neutral')
  })
})
