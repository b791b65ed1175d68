/**
 * The schema threads (schema-worker.ts) as schema-checks.ts runs them: each runs one job at a
 * time, timed from here against its budget; a job past it has its thread terminated and
 * replaced (by the idle spare when it has started: a thread takes a few hundred milliseconds to
 * load Ajv, longer on a busy machine), and ends without a verdict.
 *
 * A budget is the thread's CPU time where Linux tells it (thread-cpu.ts): the threads run below
 * the event loop's priority, and waiting for a core is no work of the schema's. It is never
 * waited past WALL_FACTOR times in wall time. One sweep looks at the busy threads, rather than a
 * timer per job: a timer set and cleared for every answer cost the event loop more than the
 * message itself (bench/schema-check.ts). The sweep runs while any thread is busy and stops when
 * none is.
 */
import { startBackgroundThread } from '../threads/background-thread.ts'
import type { SchemaReply, SchemaRequest } from './schema-worker.ts'
import { cpuNsOf } from './thread-cpu.ts'

/**
 * A budget of CPU time is cut in any case once this many times its length has passed. Not less:
 * on the loaded 2-core machine a bomb's 100 ms of CPU took about 1 s of wall time (the threads
 * run at SCHED_BATCH, nice +10), so a factor near 10 would cut honest schemas for the machine's
 * load. A long wall time delays the owner's own jobs; others start on the thread it leaves free
 * (schema-turns.ts).
 */
const WALL_FACTOR = 20
/**
 * A thread's `known` texts are forgotten at this many: all of them are then still in its cache
 * (answer-schema.ts keeps the 256 last used), so judging against one needs no compile's budget.
 */
const KNOWN_MAX = 128
const WORKER = new URL('./schema-worker.ts', import.meta.url)
/** A thread that died while starting is started again after this long. */
const RESTART_MS = 1000

/** `finish`: with the thread's reply, or null (past its budget, the thread died, closed). */
export interface Job {
  request: Omit<SchemaRequest, 'id'>
  finish(reply: SchemaReply | null, ms: number): void
}

interface Slot {
  worker: Bun.Worker
  state: 'starting' | 'idle' | 'busy'
  job: Job | null
  jobId: number
  startedAt: number
  /** The thread's id, to read its CPU time; null when it cannot be read. */
  tid: number | null
  /** The thread's CPU time (ns) at its latest reply. */
  cpuNs: number | null
  /** The budget under way: from when, of how long, and when the sweep looks at it next. */
  phase: { cpuNs: number | null; wallMs: number; budgetMs: number; dueMs: number }
  /** Texts this thread has compiled (since it last forgot them, at KNOWN_MAX). */
  known: Set<string>
}

export interface SchemaThreads {
  /** Gives idle threads the jobs `take` hands out, until it has none. */
  pump(): void
  readonly replaced: number
  /** Whether the budget sweep is running: only while a thread is busy. */
  readonly sweeping: boolean
  close(): void
}

export function createSchemaThreads(options: {
  threads: number
  /** Judging an answer whose schema the thread has compiled. */
  judgeMs: number
  /** Compiling (and, for a schema the thread has not compiled, judging). */
  compileMs: number
  take: () => Job | null
}): SchemaThreads {
  const { judgeMs, compileMs, take } = options
  const slots: Slot[] = []
  let spare: Slot | null = null
  let nextId = 0
  let replaced = 0
  let closed = false
  // The sweep runs only while a thread is busy: an idle gateway's event loop is not woken 40
  // times a second for it.
  const sweepMs = Math.min(50, Math.max(5, judgeMs / 4))
  let sweep: ReturnType<typeof setInterval> | null = null

  const pump = () => {
    for (const slot of slots) {
      if (slot.state !== 'idle') continue
      const job = take()
      if (!job) return
      run(slot, job)
    }
  }

  const run = (slot: Slot, job: Job) => {
    slot.state = 'busy'
    slot.job = job
    slot.jobId = nextId++
    slot.startedAt = performance.now()
    slot.worker.ref()
    slot.worker.postMessage({ ...job.request, id: slot.jobId })
    const known = job.request.kind === 'judge' && slot.known.has(job.request.text)
    arm(slot, known ? judgeMs : compileMs)
    if (sweep === null) {
      sweep = setInterval(sweepBusy, sweepMs)
      sweep.unref()
    }
  }

  const settle = (slot: Slot, reply: SchemaReply | null) => {
    const job = slot.job
    slot.job = null
    if (job && reply) {
      if (slot.known.size >= KNOWN_MAX) slot.known.clear()
      slot.known.add(job.request.text)
    }
    job?.finish(reply, performance.now() - slot.startedAt)
  }

  /** A budget's length has passed: cut, unless the thread has used less CPU than that. */
  const expired = (slot: Slot, nowMs: number) => {
    const { phase } = slot
    const cpuNs = slot.tid === null || phase.cpuNs === null ? null : cpuNsOf(slot.tid)
    const usedMs = cpuNs === null ? Infinity : (cpuNs - phase.cpuNs!) / 1e6
    if (usedMs < phase.budgetMs && nowMs - phase.wallMs < phase.budgetMs * WALL_FACTOR) {
      phase.dueMs = nowMs + Math.max(5, phase.budgetMs - usedMs)
      return
    }
    replace(slot)
  }
  const sweepBusy = () => {
    const now = performance.now()
    for (const slot of [...slots]) {
      if (slot.state === 'busy' && now >= slot.phase.dueMs) expired(slot, now)
    }
    if (sweep !== null && !slots.some((slot) => slot.state === 'busy')) {
      clearInterval(sweep)
      sweep = null
    }
  }

  /** The thread is terminated mid-job (or died): its job ends without a verdict. */
  const replace = (slot: Slot) => {
    const index = slots.indexOf(slot)
    if (index < 0) return
    slot.worker.terminate()
    settle(slot, null)
    replaced++
    if (closed) slots.splice(index, 1)
    else if (spare?.state === 'idle') {
      slots[index] = spare
      spare = spawn()
    } else slots[index] = spawn()
    pump()
  }

  function spawn(): Slot {
    const slot = startSlot({
      lost() {
        // One that died before it was ready (it could not load) is not restarted in a hot loop.
        const later = slot.state === 'starting' ? RESTART_MS : 0
        setTimeout(() => {
          if (slot === spare) spare = closed ? null : spawn()
          if (slots.includes(slot)) replace(slot)
        }, later)
      },
      ready: pump,
      progress: () => arm(slot, judgeMs),
      replied(reply) {
        settle(slot, reply)
        slot.state = 'idle'
        slot.worker.unref()
        pump()
      },
    })
    return slot
  }

  for (let i = 0; i < options.threads; i++) slots.push(spawn())
  spare = spawn()

  return {
    pump,
    get replaced() {
      return replaced
    },
    get sweeping() {
      return sweep !== null
    },
    close() {
      closed = true
      if (sweep !== null) clearInterval(sweep)
      sweep = null
      spare?.worker.terminate()
      spare = null
      for (const slot of slots.splice(0)) {
        slot.worker.terminate()
        settle(slot, null)
      }
    },
  }
}

/** A new budget of `ms` starts now, from the thread's CPU time at its latest reply. */
function arm(slot: Slot, ms: number) {
  const now = performance.now()
  slot.phase = { cpuNs: slot.cpuNs, wallMs: now, budgetMs: ms, dueMs: now + ms }
}

/** A thread, told apart from its replies: ready, a judgement's compile done, a job's answer. */
function startSlot(on: {
  lost(): void
  ready(): void
  progress(): void
  replied(reply: SchemaReply): void
}): Slot {
  const worker = startBackgroundThread(WORKER, () => on.lost())
  const slot: Slot = {
    worker,
    state: 'starting',
    job: null,
    jobId: -1,
    startedAt: 0,
    known: new Set(),
    tid: null,
    cpuNs: null,
    phase: { cpuNs: null, wallMs: 0, budgetMs: 0, dueMs: Infinity },
  }
  worker.addEventListener('message', (event) => {
    const reply = (event as MessageEvent<SchemaReply>).data
    slot.cpuNs = reply.cpuNs
    if (reply.kind === 'ready') {
      slot.tid = reply.tid
      slot.state = 'idle'
      return on.ready()
    }
    if (slot.job === null || reply.id !== slot.jobId) return
    if (reply.kind === 'progress') return on.progress()
    on.replied(reply)
  })
  return slot
}
