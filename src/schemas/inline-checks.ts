/**
 * SchemaChecks on the calling thread, with no time budget: the old way, kept as the baseline the
 * bench (bench/schema-check.ts) measures the schema threads against, and for callers that only
 * ever see the gateway's own schemas (a validator made without schema threads, in tests). The
 * gateway itself never judges a tenant's schema here.
 */
import { compileAnswerSchema } from './answer-schema.ts'
import type { SchemaChecks } from './schema-checks.ts'
import { judgeChoices } from './structured-answer.ts'

export function inlineSchemaChecks(): SchemaChecks {
  const compiled = (text: string) =>
    compileAnswerSchema(JSON.parse(text) as Record<string, unknown>, text)
  return {
    budgetMs: Infinity,
    replaced: 0,
    async compile(text) {
      const started = performance.now()
      const result = compiled(text)
      const ms = performance.now() - started
      if (result.ok) return { ok: true, recursion: result.schema.recursion as string[] | null, ms }
      return {
        ok: false,
        reason: 'pattern' in result && result.pattern ? 'pattern' : 'invalid',
        message: result.message,
        ms,
      }
    },
    async judge(job) {
      const result = compiled(job.text)
      const check = result.ok ? (value: unknown) => result.schema.check(value) : null
      return { checked: true, problem: judgeChoices('json_schema', job.name, job.choices, check) }
    },
    async close() {},
  }
}
