/**
 * Whose job a free schema thread starts next (schema-checks.ts): one queue per owner (an
 * account), taken round-robin, with one thread kept out of any single owner's reach whenever
 * another owner could need it.
 *
 * Round-robin alone let one account hold every thread. With two threads and an account's queue
 * of answers that each ran to the budget (about 1 s of wall time each on a loaded machine),
 * another account's every answer waited behind one of them: its 20-line batch took 11–13 s
 * instead of 0.27 s, and its live calls 0.8–1.5 s instead of 0.03 s. So an owner may hold at most
 * `threads − 1` threads
 * - while another owner has a job waiting: that job waits only for the jobs already running;
 * - for SLOW_MEMORY_MS after one of its jobs held a thread for `slowMs` or longer: the thread it
 *   leaves idle is free when another owner's job comes, which starts at once.
 * Otherwise an owner with the threads to itself uses them all: an ordinary answer takes well under
 * a millisecond, and keeping a thread from it would only halve its throughput.
 *
 * With one thread there is none to keep free, so owners only take turns: another owner's job
 * waits for the job running and for one job of each owner ahead of it in turn.
 */

/** How long an owner whose job held a thread for `slowMs` keeps a thread free for the others. */
export const SLOW_MEMORY_MS = 60_000

export interface Turns<T> {
  /** Queues `job` behind `owner`'s others. */
  push(owner: string, job: T): void
  /** The job a free thread starts next, or null: none waits, or only owners at their share do. */
  take(): T | null
  /** One of `owner`'s jobs taken has ended, having held its thread for `ms`. */
  finished(owner: string, ms: number): void
  /** Empties every queue, handing back the jobs that were waiting. */
  drain(): T[]
}

interface Owner<T> {
  queue: T[]
  /** Jobs taken and not finished. */
  running: number
}

/** `slowMs`: a job that holds its thread this long marks its owner as slow (SLOW_MEMORY_MS). */
export function createTurns<T>(options: {
  threads: number
  slowMs: number
  now?: () => number
}): Turns<T> {
  const { threads, slowMs, now = () => performance.now() } = options
  const owners = new Map<string, Owner<T>>()
  /** Owners with jobs waiting, in turn order. */
  const turn: string[] = []
  /** When each owner's latest slow job ended, oldest first. */
  const slowAt = new Map<string, number>()

  const slow = (name: string) => {
    const at = slowAt.get(name)
    return at !== undefined && now() - at < SLOW_MEMORY_MS
  }
  /** How many threads `name` (waiting, so in `turn`) may hold. */
  const share = (name: string) =>
    turn.length > 1 || slow(name) ? Math.max(1, threads - 1) : threads

  const markSlow = (name: string) => {
    const at = now()
    slowAt.delete(name)
    slowAt.set(name, at)
    for (const [old, oldAt] of slowAt) {
      if (at - oldAt < SLOW_MEMORY_MS) break
      slowAt.delete(old)
    }
  }

  return {
    push(name, job) {
      let owner = owners.get(name)
      if (!owner) owners.set(name, (owner = { queue: [], running: 0 }))
      if (owner.queue.length === 0) turn.push(name)
      owner.queue.push(job)
    },
    take() {
      for (let i = 0; i < turn.length; i++) {
        const name = turn[i]
        const owner = owners.get(name)!
        if (owner.running >= share(name)) continue
        turn.splice(i, 1)
        owner.running++
        const job = owner.queue.shift()!
        if (owner.queue.length > 0) turn.push(name)
        return job
      }
      return null
    },
    finished(name, ms) {
      // An owner is forgotten once it has nothing waiting or running (or the queues were drained).
      const owner = owners.get(name)
      if (!owner) return
      owner.running--
      if (ms >= slowMs) markSlow(name)
      if (owner.running === 0 && owner.queue.length === 0) owners.delete(name)
    },
    drain() {
      const jobs = [...owners.values()].flatMap((owner) => owner.queue)
      owners.clear()
      turn.length = 0
      return jobs
    },
  }
}
