/**
 * Which fine-tunes each replica holds and where a call for one goes (providers/fine-tune-residency.ts),
 * on a real replica pool; the load and unload requests are recorded instead of sent, so each
 * rule can be checked step by step (the same rules over HTTP: test/engine/lora-pool.test.ts).
 */
import { afterEach, describe, expect, test } from 'bun:test'
import { upstreamError } from '../../providers/classify-error.ts'
import {
  createFineTuneResidency,
  type LoadResult,
  type FineTuneCalls,
  type FineTuneLease,
} from '../../providers/fine-tune-residency.ts'
import { createReplicaPool, type Replica, type ReplicaPool } from '../../providers/pool.ts'

const fineTune = (name: string) => ({ name, path: `/adapters/${name}` })

/** Loads and unloads as they are asked for, each answered when the test says (or at once). */
function recordingCalls(options: { manual?: boolean } = {}) {
  const log: string[] = []
  const pending: { name: string; resolve: (result: LoadResult) => void }[] = []
  const calls: FineTuneCalls = {
    load(replica, lora) {
      log.push(`load ${lora.name} @${replica.baseUrl}`)
      if (!options.manual) return Promise.resolve({ ok: true })
      return new Promise((resolve) => pending.push({ name: lora.name, resolve }))
    },
    async unload(replica, name) {
      log.push(`unload ${name} @${replica.baseUrl}`)
    },
    // What a replica holds beyond this instance's view: nothing, unless a test says.
    async held() {
      return []
    },
  }
  return { calls, log, pending }
}

test('a replica full of fine-tunes another instance loaded: one of those is unloaded, the load tried again', async () => {
  const [replica] = replicas(1)
  const log: string[] = []
  // The replica holds two fine-tunes this residency never loaded, and refuses a third until one goes.
  const onReplica = new Set(['other-1', 'other-2'])
  const calls: FineTuneCalls = {
    async load(_, lora) {
      log.push(`load ${lora.name}`)
      if (onReplica.size >= 2) {
        const error = upstreamError('server_error', 'max_loras loaded already', { status: 400 })
        return { ok: false, error, health: 'ok' }
      }
      onReplica.add(lora.name)
      return { ok: true }
    },
    async unload(_, name) {
      log.push(`unload ${name}`)
      onReplica.delete(name)
    },
    held: async () => [...onReplica],
  }
  const residency = createFineTuneResidency({ pool, calls }, { maxLoras: 2 })
  const lease = await leaseOf(residency.acquire(fineTune('mine'), never))
  expect(lease.replica).toBe(replica)
  expect(log).toEqual(['load mine', 'unload other-1', 'load mine'])
  lease.release()
})

let pool: ReplicaPool
afterEach(async () => {
  await pool?.close()
})

function replicas(n: number) {
  pool = createReplicaPool({
    baseUrls: ['http://127.0.0.1:9/a', 'http://127.0.0.1:9/b'].slice(0, n),
    connections: 1,
    timeoutMs: 1000,
    probePath: '/models',
    probeHeaders: {},
  })
  return pool.replicas as Replica[]
}
const twoReplicas = () => replicas(2)

const never = new AbortController().signal

async function leaseOf(result: Promise<Awaited<ReturnType<Residency['acquire']>>>) {
  const acquired = await result
  if (!acquired.ok) throw new Error(`not acquired: ${acquired.error.message}`)
  return acquired.lease
}
type Residency = ReturnType<typeof createFineTuneResidency>

function done(lease: FineTuneLease) {
  lease.release()
  pool.release(lease.replica, 'ok')
}

describe('LoRA residency', () => {
  test('loads a fine-tune once, then sends its calls to the replica that holds it', async () => {
    const [a, b] = twoReplicas()
    const { calls, log } = recordingCalls()
    const residency = createFineTuneResidency({ pool, calls }, { maxLoras: 2 })
    const first = await leaseOf(residency.acquire(fineTune('x'), never))
    done(first)
    // The other replica is idler now, but it does not hold x.
    b.inFlight = 0
    a.inFlight = 5
    const second = await leaseOf(residency.acquire(fineTune('x'), never))
    expect(second.replica).toBe(first.replica)
    expect(log).toEqual([`load x @${first.replica.baseUrl}`])
    done(second)
    a.inFlight = 0
  })

  test('calls that want a fine-tune while it loads share the one load', async () => {
    twoReplicas()
    const { calls, log, pending } = recordingCalls({ manual: true })
    const residency = createFineTuneResidency({ pool, calls }, { maxLoras: 2 })
    const waiting = [1, 2, 3].map(() => leaseOf(residency.acquire(fineTune('x'), never)))
    await Bun.sleep(5)
    expect(log).toEqual([expect.stringMatching(/^load x @/)])
    pending[0].resolve({ ok: true })
    const leases = await Promise.all(waiting)
    expect(new Set(leases.map((l) => l.replica)).size).toBe(1)
    expect(leases[0].replica.inFlight).toBe(3)
    leases.forEach(done)
  })

  test('a full replica unloads its least recently used fine-tune no call is using, before the load', async () => {
    const [only] = replicas(1)
    const { calls, log } = recordingCalls()
    const residency = createFineTuneResidency({ pool, calls }, { maxLoras: 2 })
    done(await leaseOf(residency.acquire(fineTune('x'), never)))
    done(await leaseOf(residency.acquire(fineTune('y'), never)))
    // x used again: y is now the least recently used.
    done(await leaseOf(residency.acquire(fineTune('x'), never)))
    const z = await leaseOf(residency.acquire(fineTune('z'), never))
    expect(log).toEqual([
      `load x @${only.baseUrl}`,
      `load y @${only.baseUrl}`,
      `unload y @${only.baseUrl}`,
      `load z @${only.baseUrl}`,
    ])
    expect(residency.held(only).sort()).toEqual(['x', 'z'])
    done(z)
  })

  test('a fine-tune in use is never unloaded: the next one waits for a place to come free', async () => {
    const [a, b] = twoReplicas()
    const { calls, log } = recordingCalls()
    const residency = createFineTuneResidency({ pool, calls }, { maxLoras: 1 })
    const x = await leaseOf(residency.acquire(fineTune('x'), never))
    const y = await leaseOf(residency.acquire(fineTune('y'), never))
    let zGot: FineTuneLease | null = null
    const z = leaseOf(residency.acquire(fineTune('z'), never)).then((lease) => (zGot = lease))
    await Bun.sleep(20)
    expect(zGot).toBeNull()
    expect(log.filter((l) => l.startsWith('unload'))).toEqual([])
    done(y)
    await z
    expect(zGot!.replica).toBe(y.replica)
    expect(log.slice(-2)).toEqual([
      `unload y @${y.replica.baseUrl}`,
      `load z @${y.replica.baseUrl}`,
    ])
    expect([residency.held(a), residency.held(b)].flat().sort()).toEqual(['x', 'z'])
    done(x)
    done(zGot!)
  })

  test('waiting for a place ends with the call deadline, a timeout for the retry policy', async () => {
    twoReplicas()
    const { calls } = recordingCalls()
    const residency = createFineTuneResidency({ pool, calls }, { maxLoras: 1 })
    const x = await leaseOf(residency.acquire(fineTune('x'), never))
    const y = await leaseOf(residency.acquire(fineTune('y'), never))
    const result = await residency.acquire(fineTune('z'), AbortSignal.timeout(30))
    expect(result.ok).toBe(false)
    expect(!result.ok && result.error).toMatchObject({ kind: 'timeout', retryable: true })
    done(x)
    done(y)
  })

  test('a fine-tune a replica lost is loaded again on the next call', async () => {
    twoReplicas()
    const { calls, log } = recordingCalls()
    const residency = createFineTuneResidency({ pool, calls }, { maxLoras: 2 })
    const first = await leaseOf(residency.acquire(fineTune('x'), never))
    first.lost()
    pool.release(first.replica, 'ok')
    expect(residency.held(first.replica)).toEqual([])
    done(await leaseOf(residency.acquire(fineTune('x'), never)))
    expect(log.filter((l) => l.startsWith('load x'))).toHaveLength(2)
  })

  test('a load that fails gives the replica back and says which, with its health', async () => {
    const [a, b] = twoReplicas()
    const { calls } = recordingCalls({ manual: true })
    const failing: FineTuneCalls = {
      ...calls,
      load: async () => ({
        ok: false,
        error: upstreamError('connection', 'refused'),
        health: 'down',
      }),
    }
    const residency = createFineTuneResidency({ pool, calls: failing }, { maxLoras: 2 })
    const result = await residency.acquire(fineTune('x'), never)
    expect(result.ok).toBe(false)
    expect(!result.ok && result.health).toBe('down')
    expect(!result.ok && [a, b].includes(result.replica!)).toBe(true)
    expect(a.inFlight + b.inFlight).toBe(0)
    expect([residency.held(a), residency.held(b)].flat()).toEqual([])
    // Told to skip it, the next try goes to the other replica.
    const skipped = !result.ok ? result.replica! : a
    const other = await residency.acquire(fineTune('x'), never, new Set([skipped]))
    expect(!other.ok && other.replica).toBe(skipped === a ? b : a)
  })

  test("a fine-tune whose replica was just taken out is not moved into another fine-tune's place", async () => {
    const [a, b] = twoReplicas()
    const { calls, log } = recordingCalls()
    const residency = createFineTuneResidency({ pool, calls }, { maxLoras: 1, migrateAfterMs: 50 })
    const x = await leaseOf(residency.acquire(fineTune('x'), never))
    done(x)
    const other = x.replica === a ? b : a
    done(await leaseOf(residency.acquire(fineTune('y'), never)))
    expect(residency.held(other)).toEqual(['y'])
    // x's replica could not be reached just now: the call fails retryably, y stays.
    const refused = await residency.acquire(fineTune('x'), never, new Set([x.replica]))
    expect(!refused.ok && refused.error).toMatchObject({ kind: 'connection', retryable: true })
    expect(residency.held(other)).toEqual(['y'])
    // Out for longer than a restart takes: x moves in y's place.
    x.replica.healthy = false
    x.replica.outSince = Date.now() - 100
    const moved = await leaseOf(residency.acquire(fineTune('x'), never, new Set([x.replica])))
    expect(moved.replica).toBe(other)
    expect(log.slice(-2)).toEqual([`unload y @${other.baseUrl}`, `load x @${other.baseUrl}`])
    done(moved)
  })
})
