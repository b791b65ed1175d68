/**
 * Compiling and judging tenants' schemas off the event loop, each within a time budget (SPEC §19,
 * MULTIGRID_SCHEMA_CHECK_MS). A few threads (schema-worker.ts) own the Ajv instances and their
 * compiled schemas; each runs one message at a time, timed from here. A message that passes its
 * budget has its thread terminated and replaced, and gets the verdict "over budget": at
 * validation the schema is refused as too complex, at result time the answer is unchecked.
 *
 * Judging an answer gets the budget; compiling a schema gets COMPILE_BUDGETS of them (Ajv takes a
 * few milliseconds for an ordinary schema, hundreds for one of 1,000 properties on a busy machine, and an
 * ordinary schema must never be refused for it). A judgement whose schema its thread has not
 * compiled yet gets the compile's budget first, then the answer's.
 *
 * A budget is the thread's CPU time where Linux tells it (thread-cpu.ts): the threads run below
 * the event loop's priority, and waiting for a core is no work of the schema's. It is never
 * waited past WALL_FACTOR times in wall time.
 *
 * A spare thread, started and idle, takes the place of one that is replaced.
 *
 * Jobs wait in one queue per owner (an account), taken round-robin: an account with many schemas
 * to compile, or many answers to judge against a slow schema, delays only its own jobs, never by
 * more than one budget per thread the others'.
 */
import { availableParallelism } from 'node:os'
import { startBackgroundThread } from '../threads/background-thread.ts'
import type { AnswerChoice } from './structured-answer.ts'
import type { SchemaReply, SchemaRequest } from './schema-worker.ts'
import { cpuNsOf } from './thread-cpu.ts'

/** Compiling a schema may take this many budgets. */
export const COMPILE_BUDGETS = 10
/** A budget of CPU time is cut in any case once this many times its length has passed. */
const WALL_FACTOR = 20

/** `ms`: how long the thread took (what a file's schemas add up, file-schemas.ts). */
export type CompileVerdict = (
  | { ok: true; recursion: string[] | null }
  /** `reason`: the schema is not one Ajv takes, has a pattern RE2 cannot take, or took too long. */
  | { ok: false; reason: 'invalid' | 'pattern' | 'budget'; message: string }
) & { ms: number }

/** `problem`: as judgeChoices answers; `unchecked`: why the answer could not be judged. */
export type JudgeVerdict =
  { checked: true; problem: string | null } | { checked: false; unchecked: string }

export interface JudgeJob {
  /** The schema's JSON text. */
  text: string
  name: string | null
  choices: AnswerChoice[]
}

export interface SchemaChecks {
  compile(text: string, owner: string): Promise<CompileVerdict>
  judge(job: JudgeJob, owner: string): Promise<JudgeVerdict>
  readonly budgetMs: number
  /** Threads replaced after passing the budget (or dying), since the start. */
  readonly replaced: number
  close(): Promise<void>
}

interface Job {
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
  /** The thread's CPU time (ns) at its latest reply, and when the current budget began. */
  cpuNs: number | null
  /** The budget under way: from when, of how long, and when the sweep looks at it next. */
  phase: { cpuNs: number | null; wallMs: number; budgetMs: number; dueMs: number }
  /**
   * Texts this thread has compiled since `known` was last emptied, at KNOWN_MAX: all of them are
   * still in the thread's cache (answer-schema.ts keeps the 256 last used), so a judgement of one
   * needs no compile's budget.
   */
  known: Set<string>
}

const KNOWN_MAX = 128

const WORKER = new URL('./schema-worker.ts', import.meta.url)

export function createSchemaChecks(options: { budgetMs: number; threads?: number }): SchemaChecks {
  const { budgetMs } = options
  const compileMs = budgetMs * COMPILE_BUDGETS
  const threads = options.threads ?? Math.max(1, Math.min(2, availableParallelism()))
  const queues = new Map<string, Job[]>()
  /** Owners with jobs waiting, in turn order. */
  const turn: string[] = []
  const slots: Slot[] = []
  let nextId = 0
  let replaced = 0
  let closed = false

  const take = (): Job | null => {
    const owner = turn.shift()
    if (owner === undefined) return null
    const queue = queues.get(owner)!
    const job = queue.shift()!
    if (queue.length > 0) turn.push(owner)
    else queues.delete(owner)
    return job
  }

  const pump = () => {
    for (const slot of slots) {
      if (slot.state !== 'idle') continue
      const job = take()
      if (!job) return
      run(slot, job)
    }
  }

  /** A new budget of `ms` starts now, from the thread's CPU time at its latest reply. */
  const arm = (slot: Slot, ms: number) => {
    const now = performance.now()
    slot.phase = { cpuNs: slot.cpuNs, wallMs: now, budgetMs: ms, dueMs: now + ms }
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
    overBudget(slot)
  }
  // One sweep over the busy threads, rather than a timer per message: a timer set and cleared for
  // every answer cost the event loop more than the message itself (bench/schema-check.ts).
  const sweep = setInterval(
    () => {
      const now = performance.now()
      for (const slot of [...slots]) {
        if (slot.state === 'busy' && now >= slot.phase.dueMs) expired(slot, now)
      }
    },
    Math.min(50, Math.max(5, budgetMs / 4)),
  )
  sweep.unref()

  const run = (slot: Slot, job: Job) => {
    slot.state = 'busy'
    slot.job = job
    slot.jobId = nextId++
    slot.startedAt = performance.now()
    slot.worker.ref()
    slot.worker.postMessage({ ...job.request, id: slot.jobId })
    const judging = job.request.kind === 'judge' && slot.known.has(job.request.text)
    arm(slot, judging ? budgetMs : compileMs)
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

  /**
   * The thread is terminated mid-job (or died): its job ends without a verdict, and the spare
   * takes its place when it has started (a thread takes a few hundred milliseconds to load Ajv,
   * longer on a busy machine); a new spare starts.
   */
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
  const overBudget = (slot: Slot) => replace(slot)

  function spawn(): Slot {
    const worker = startBackgroundThread(WORKER, () => {
      if (slot === spare) spare = closed ? null : spawn()
      if (slots.includes(slot)) replace(slot)
    })
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
        return pump()
      }
      if (slot.job === null || reply.id !== slot.jobId) return
      if (reply.kind === 'progress') return arm(slot, budgetMs)
      settle(slot, reply)
      slot.state = 'idle'
      worker.unref()
      pump()
    })
    return slot
  }

  for (let i = 0; i < threads; i++) slots.push(spawn())
  let spare: Slot | null = spawn()

  const enqueue = (owner: string, job: Job) => {
    if (closed) return job.finish(null, 0)
    let queue = queues.get(owner)
    if (!queue) {
      queues.set(owner, (queue = []))
      turn.push(owner)
    }
    queue.push(job)
    pump()
  }

  return {
    budgetMs,
    get replaced() {
      return replaced
    },
    compile: (text, owner) =>
      new Promise((resolve) =>
        enqueue(owner, {
          request: { kind: 'compile', text },
          finish(reply, ms) {
            if (reply?.kind !== 'compiled') {
              return resolve({
                ok: false,
                reason: 'budget',
                message: `json_schema.schema is too complex: compiling it took more than ${compileMs} ms (${COMPILE_BUDGETS} × MULTIGRID_SCHEMA_CHECK_MS)`,
                ms,
              })
            }
            if (reply.ok) return resolve({ ok: true, recursion: reply.recursion ?? null, ms })
            resolve({
              ok: false,
              reason: reply.pattern ? 'pattern' : 'invalid',
              message: reply.message ?? 'does not compile',
              ms,
            })
          },
        }),
      ),
    judge: (job, owner) =>
      new Promise((resolve) =>
        enqueue(owner, {
          request: { kind: 'judge', ...job },
          finish(reply) {
            if (reply?.kind === 'judged') return resolve({ checked: true, problem: reply.problem })
            resolve({
              checked: false,
              unchecked: `the answer could not be checked against the schema${job.name === null ? '' : ` ${job.name}`}: checking it took more than ${budgetMs} ms (MULTIGRID_SCHEMA_CHECK_MS); the schema is too complex to judge (simplify its $ref, anyOf and oneOf branches). The answer is billed: the upstream answered it`,
            })
          },
        }),
      ),
    async close() {
      closed = true
      clearInterval(sweep)
      for (const job of [...queues.values()].flat()) job.finish(null, 0)
      queues.clear()
      turn.length = 0
      spare?.worker.terminate()
      spare = null
      for (const slot of slots.splice(0)) {
        slot.worker.terminate()
        settle(slot, null)
      }
    },
  }
}
