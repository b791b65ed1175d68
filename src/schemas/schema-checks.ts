/**
 * Compiling and judging tenants' schemas off the event loop, each within a time budget (docs/structured-outputs.md,
 * MULTIGRID_SCHEMA_CHECK_MS). A few threads (schema-threads.ts, schema-worker.ts) own the Ajv
 * instances and their compiled schemas; a job that passes its budget has its thread replaced and
 * gets the verdict "over budget": at validation the schema is refused as too complex, at result
 * time the answer is unchecked.
 *
 * Judging an answer gets the budget; compiling a schema gets COMPILE_BUDGETS of them (Ajv takes a
 * few milliseconds for an ordinary schema, hundreds for one of 1,000 properties on a busy
 * machine, and an ordinary schema must never be refused for it). A judgement whose schema its
 * thread has not compiled yet gets the compile's budget first, then the answer's.
 *
 * Jobs wait in one queue per owner (an account), taken round-robin, and no owner holds every
 * thread while another's job waits or after one of its jobs took a budget (schema-turns.ts): an
 * account with many schemas to compile, or many answers to judge against a slow schema, delays
 * only its own jobs; another account's wait at most for the jobs already running, and mostly
 * start at once on the thread kept free. A text refused is refused again at once for a while,
 * and one owner's burst of one text compiles it once (compile-memory.ts).
 */
import { availableParallelism } from 'node:os'
import type { AnswerChoice } from './structured-answer.ts'
import { createCompileMemory } from './compile-memory.ts'
import { createSchemaThreads, type Job } from './schema-threads.ts'
import { createTurns } from './schema-turns.ts'

/** Compiling a schema may take this many budgets. */
export const COMPILE_BUDGETS = 10

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

export function createSchemaChecks(options: { budgetMs: number; threads?: number }): SchemaChecks {
  const { budgetMs } = options
  const compileMs = budgetMs * COMPILE_BUDGETS
  const count = options.threads ?? Math.max(1, Math.min(2, availableParallelism()))
  // A job that held its thread for a whole answer's budget is one another account should not have
  // to wait behind; an ordinary answer takes well under a millisecond, a compile a few.
  const turns = createTurns<Job>({ threads: count, slowMs: budgetMs })
  let closed = false
  // A cut past the budget is the schema's; a reply missing sooner (a thread that died, the pool
  // closing) is not, and is not remembered against the text.
  const memory = createCompileMemory<CompileVerdict>({
    kept: (refusal) => refusal.ok || refusal.reason !== 'budget' || refusal.ms >= compileMs,
  })

  const threads = createSchemaThreads({
    threads: count,
    judgeMs: budgetMs,
    compileMs,
    take: turns.take,
  })

  const enqueue = (owner: string, job: Job) => {
    if (closed) return job.finish(null, 0)
    turns.push(owner, {
      request: job.request,
      finish(reply, ms) {
        turns.finished(owner, ms)
        job.finish(reply, ms)
      },
    })
    threads.pump()
  }

  /** A compile on a schema thread, within COMPILE_BUDGETS budgets. */
  const compileOn = (text: string, owner: string): Promise<CompileVerdict> =>
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
    )

  return {
    budgetMs,
    get replaced() {
      return threads.replaced
    },
    compile: (text, owner) => memory.once(owner, text, () => compileOn(text, owner)),
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
      for (const job of turns.drain()) job.finish(null, 0)
      threads.close()
    },
  }
}
