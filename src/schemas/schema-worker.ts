/**
 * A schema thread (schema-checks.ts): owns its Ajv instances and their compiled schemas, and does
 * the two things a tenant's schema can make slow — compiling it and judging answers against it —
 * one message at a time. The caller times each message and terminates this thread when one takes
 * longer than its budget, so nothing here needs to watch the clock.
 */
import { lowerThreadPriority } from '../threads/background-priority.ts'
import { nameThread } from '../threads/thread-name.ts'
import { compileAnswerSchema, isCompiled } from './answer-schema.ts'
import { ownCpuNs, ownThreadId } from './thread-cpu.ts'
import { judgeChoices, type AnswerChoice } from './structured-answer.ts'

export type SchemaRequest =
  | { kind: 'compile'; id: number; text: string }
  | {
      kind: 'judge'
      id: number
      /** The schema's JSON text (the compiled cache's key). */
      text: string
      name: string | null
      choices: AnswerChoice[]
    }

/** Every reply carries `cpuNs`: this thread's CPU time as it sent it (thread-cpu.ts), or null. */
export type SchemaReply = { cpuNs: number | null } &
  /** `tid`: this thread's id, for the caller to read its CPU time (thread-cpu.ts). */
  (
    | { kind: 'ready'; tid: number | null }
    /** A judge message's schema was not compiled here yet and now is: its budget starts again. */
    | { kind: 'progress'; id: number }
    | {
        kind: 'compiled'
        id: number
        ok: boolean
        message?: string
        /** Refused for a pattern RE2 cannot take. */
        pattern?: boolean
        recursion?: string[] | null
      }
    | { kind: 'judged'; id: number; problem: string | null }
  )

declare const self: Worker

function compile(text: string) {
  let schema: Record<string, unknown>
  try {
    schema = JSON.parse(text) as Record<string, unknown>
  } catch {
    return { ok: false as const, message: 'is not JSON' }
  }
  return compileAnswerSchema(schema, text)
}

self.onmessage = (event: MessageEvent<SchemaRequest>) => {
  const request = event.data
  if (request.kind === 'compile') {
    const compiled = compile(request.text)
    const cpuNs = ownCpuNs()
    const reply: SchemaReply = compiled.ok
      ? {
          kind: 'compiled',
          id: request.id,
          ok: true,
          recursion: compiled.schema.recursion as never,
          cpuNs,
        }
      : {
          kind: 'compiled',
          id: request.id,
          ok: false,
          message: compiled.message,
          pattern: 'pattern' in compiled && compiled.pattern === true,
          cpuNs,
        }
    self.postMessage(reply)
    return
  }
  const fresh = !isCompiled(request.text)
  const compiled = compile(request.text)
  if (fresh)
    self.postMessage({ kind: 'progress', id: request.id, cpuNs: ownCpuNs() } satisfies SchemaReply)
  // A schema this gateway once accepted and now cannot compile: the answer is not judged.
  const check = compiled.ok ? (value: unknown) => compiled.schema.check(value) : null
  const problem = judgeChoices('json_schema', request.name, request.choices, check)
  self.postMessage({
    kind: 'judged',
    id: request.id,
    problem,
    cpuNs: ownCpuNs(),
  } satisfies SchemaReply)
}

nameThread('mg-schema')
// Schemas wait for the event loop, never the other way round: on a busy machine the loop (live
// calls, /healthz, every other account's lines) gets the core first.
lowerThreadPriority()
// Ready once the default draft's instance exists (it compiles its meta-schema): a budget never
// pays for this thread's start.
compileAnswerSchema({ type: 'object' })
self.postMessage({ kind: 'ready', tid: ownThreadId(), cpuNs: ownCpuNs() } satisfies SchemaReply)
