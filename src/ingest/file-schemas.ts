/**
 * The json_schemas of a batch file, compiled once each (docs/open-models.md, docs/structured-outputs.md) on the schema threads
 * (src/schemas/schema-checks.ts) after the lines' other checks: the event loop only hands texts
 * over and reads verdicts, so a file of thousands of distinct schemas stalls no one. A schema that
 * does not compile, takes a pattern RE2 cannot, or passes the time budget is an issue on every
 * line that uses it; one that recurses without end is a warning.
 *
 * The work per file is bounded: at most MAX_DISTINCT_SCHEMAS distinct schemas, and compiling
 * stops once the file's schemas have taken FILE_BUDGETS budgets of the threads' time in all (the
 * rest are refused). Other accounts' schemas take their turns meanwhile (schema-checks.ts).
 */
import type { SchemaChecks } from '../schemas/schema-checks.ts'
import { compileProblems } from './check-structured.ts'
import { MAX_ISSUES, MAX_WARNINGS, type BodyProblem, type Issue, type Warning } from './issues.ts'
import { inResponsesTerms } from './responses-line.ts'
import { messagesNames } from '../../providers/anthropic/messages-path.ts'
import type { AskedApi } from './asked-as-chat.ts'
import { problemInCallersTerms } from './callers-names.ts'

/** A schema problem in a line's own API: response_format is a field of no message, so no origins. */
const SCHEMA_TERMS: Record<AskedApi, (problem: BodyProblem) => BodyProblem> = {
  responses: inResponsesTerms,
  messages: (problem) => problemInCallersTerms(problem, messagesNames([])),
}
import type { FileVerdict } from './validate-batch-file.ts'

/** Distinct schemas one file may carry. */
export const MAX_DISTINCT_SCHEMAS = 2000
/**
 * A file's schemas may take this many time budgets of the threads' time in all (100 s by
 * default): a safety net for files of slow schemas, far above what 2,000 ordinary ones take.
 */
export const FILE_BUDGETS = 1000
/** Compiles under way at once for one file: as many as there are schema threads, about. */
const IN_FLIGHT = 4

/** The verdict with the schemas' issues and warnings merged in, in line order. */
export async function compileFileSchemas(
  verdict: FileVerdict,
  checks: SchemaChecks,
  owner: string,
): Promise<FileVerdict> {
  const schemas = verdict.schemas
  if (!schemas || schemas.size === 0) return verdict
  const issues: Issue[] = []
  const warnings: Warning[] = []
  const at = (field: string) => `body.${field}`
  const cap = checks.budgetMs * FILE_BUDGETS
  let spent = 0
  const texts = [...schemas.keys()]
  let next = 0
  const worker = async () => {
    while (next < texts.length) {
      const index = next++
      const text = texts[index]
      const users = schemas.get(text)!
      let found: ReturnType<typeof compileProblems>
      if (index >= MAX_DISTINCT_SCHEMAS || spent > cap) {
        found = { problem: overWork(index >= MAX_DISTINCT_SCHEMAS, cap), warning: null }
      } else {
        const verdict = await checks.compile(text, owner)
        spent += verdict.ms
        found = compileProblems(verdict, at)
      }
      for (const { line, customId, api } of users) {
        // A Responses or Messages line is told in its own names (text.format, output_config.format).
        const terms = api ? SCHEMA_TERMS[api] : (problem: BodyProblem) => problem
        if (found.problem) issues.push({ line, custom_id: customId, ...terms(found.problem) })
        if (found.warning) {
          const { path: param, message, fix } = terms(found.warning)
          warnings.push({ line, custom_id: customId, param, message, fix })
        }
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(IN_FLIGHT, texts.length) }, worker))
  return merged(verdict, issues, warnings)
}

function overWork(count: boolean, capMs: number) {
  return {
    path: 'body.response_format',
    message: count
      ? `the file has more than ${MAX_DISTINCT_SCHEMAS} distinct json_schemas; this one was not compiled`
      : `the file's json_schemas took more than ${capMs} ms to compile in all; this one was not compiled`,
    fix: 'use fewer distinct schemas in one file (lines that share a schema are compiled once), or split the file into several batches',
  }
}

const byLine = (a: { line: number }, b: { line: number }) => a.line - b.line

function merged(verdict: FileVerdict, issues: Issue[], warnings: Warning[]): FileVerdict {
  if (issues.length > 0 || !verdict.ok) {
    const before = verdict.ok ? [] : verdict.issues
    const omittedBefore = verdict.ok ? 0 : verdict.omitted
    // Sorted stably: a line's own issues keep their order.
    const all = [...before, ...issues].sort(byLine)
    const listed = all.slice(0, MAX_ISSUES)
    return {
      ok: false,
      issues: listed,
      omitted: omittedBefore + all.length - listed.length,
      lineCount: verdict.ok ? verdict.lines.length : verdict.lineCount,
    }
  }
  if (warnings.length === 0) return verdict
  const all = [...verdict.warnings, ...warnings].sort(byLine)
  const listed = all.slice(0, MAX_WARNINGS)
  return {
    ...verdict,
    warnings: listed,
    warningsOmitted: verdict.warningsOmitted + all.length - listed.length,
  }
}
