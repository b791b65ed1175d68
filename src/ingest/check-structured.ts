/**
 * The rules of structured requests (docs/open-models.md), checked with the rest of a body: vLLM's guided_*
 * parameters are refused (it has ignored them silently since v0.12), a `json_schema` must be
 * within the bounds of docs/structured-outputs.md and compile, a structured batch line must bound its answer, and a
 * schema that recurses without end is allowed but warned about.
 *
 * The bounds are checked here, on the caller's thread (a cheap walk); compiling runs on the schema
 * threads with a time budget (src/schemas/schema-checks.ts), after the body's other checks: the
 * body hands on the schema's text, and `compileProblems` turns the verdict into problems.
 */
import type { ModelEntry } from '../catalog/catalog-file.ts'
import type { CompileVerdict } from '../schemas/schema-checks.ts'
import { schemaBoundProblem } from '../schemas/schema-bounds.ts'
import type { ChatBody } from '../schemas/requests.ts'
import { excerpt } from '../excerpt.ts'
import type { BodyProblem } from './issues.ts'

type ResponseFormat = NonNullable<ChatBody['response_format']>

/** A request whose answer the gateway checks: json_object or json_schema. */
export function isStructured(format: unknown): format is ResponseFormat {
  const type = (format as { type?: unknown } | null | undefined)?.type
  return type === 'json_object' || type === 'json_schema'
}

const GUIDED_FIXES: Record<string, string> = {
  guided_json:
    'use response_format: {"type": "json_schema", "json_schema": {"name": "answer", "schema": <the schema you gave guided_json>}}',
  guided_choice:
    'use response_format with a schema that lists the choices: {"type": "json_schema", "json_schema": {"name": "choice", "schema": {"enum": [...]}}}',
  guided_regex:
    'use response_format: a json_schema of {"type": "string", "pattern": <your regex>}, or {"type": "json_object"}',
  guided_grammar:
    'use response_format: {"type": "json_schema", …} or {"type": "json_object"}; a free grammar has no equivalent',
}

/** vLLM's guided_* parameters, any of them. */
export function guidedProblems(
  record: Record<string, unknown>,
  at: (field: string) => string,
): BodyProblem[] {
  const problems: BodyProblem[] = []
  for (const key of Object.keys(record)) {
    if (!key.startsWith('guided_') || record[key] === undefined || record[key] === null) continue
    problems.push({
      path: at(key),
      message:
        'is not supported: vLLM servers have ignored guided_* parameters silently since v0.12, so the answer would not be constrained',
      fix: GUIDED_FIXES[key] ?? 'use response_format instead; remove ' + excerpt(key),
    })
  }
  return problems
}

/**
 * A structured body's own rules; `record` has passed the request schema's shape check of
 * response_format. Live calls need no max_tokens: their answer is not checked (see README).
 * `schemaText`: a json_schema within its bounds, as JSON text, for the caller to compile.
 */
export function structuredProblems(
  body: ChatBody,
  model: ModelEntry | undefined,
  at: (field: string) => string,
  live: boolean,
): { problems: BodyProblem[]; warnings: BodyProblem[]; schemaText?: string } {
  const problems: BodyProblem[] = []
  const warnings: BodyProblem[] = []
  const format = body.response_format
  if (!isStructured(format)) return { problems, warnings }
  if (!live && body.max_tokens === undefined && body.max_completion_tokens === undefined) {
    const limit = model ? ` (${model.max_output_tokens} for ${model.id})` : ''
    problems.push({
      path: at('max_tokens'),
      message: `is required on a structured line (response_format ${format.type})`,
      fix: `set max_tokens (or max_completion_tokens) to the most tokens an answer may take, for example 1024: a structured answer that never closes otherwise runs to the model's output limit${limit}, and is billed`,
    })
  }
  if (format.type !== 'json_schema') return { problems, warnings }
  const schema = (format as { json_schema: { schema: Record<string, unknown> } }).json_schema.schema
  const text = JSON.stringify(schema)
  const bound = schemaBoundProblem(schema, text)
  if (bound) {
    problems.push({
      path: at('response_format.json_schema.schema'),
      message: bound.message,
      fix: bound.fix,
    })
    return { problems, warnings }
  }
  return { problems, warnings, schemaText: text }
}

/** What compiling a body's schema found: a problem, or a warning (it recurses without end). */
export function compileProblems(
  verdict: CompileVerdict,
  at: (field: string) => string,
): { problem: BodyProblem | null; warning: BodyProblem | null } {
  if (!verdict.ok) {
    return {
      problem: {
        path: at('response_format'),
        message:
          verdict.reason === 'budget'
            ? verdict.message
            : `json_schema.schema does not compile as a JSON Schema: ${verdict.message}`,
        fix:
          verdict.reason === 'pattern'
            ? 'write every pattern and patternProperties key in RE2 syntax (https://github.com/google/re2/wiki/Syntax): the gateway checks answers with a linear-time engine, which has no backreferences or lookaround'
            : verdict.reason === 'budget'
              ? 'simplify the schema: fewer distinct subschemas, $ref chains and anyOf/oneOf branches'
              : 'send a valid JSON Schema (draft 2020-12 unless its $schema names 2019-09 or draft-07) in json_schema.schema, such as {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}; every $ref must point inside the schema, and lead back to a schema it is in only through a property or an item (a list\'s next, a tree\'s children)',
      },
      warning: null,
    }
  }
  if (!verdict.recursion) return { problem: null, warning: null }
  const site = ['response_format', 'json_schema', 'schema', ...verdict.recursion].join('.')
  return {
    problem: null,
    warning: {
      path: at(site),
      message:
        'the schema allows unbounded recursion: this reference leads back to a schema that contains it, so a model can keep nesting until max_tokens',
      fix: 'bound it: say how deep in the prompt (for example "exactly two levels"), or write the levels out in the schema with maxItems, and keep max_tokens set',
    },
  }
}

/**
 * Anthropic's JSON outputs take a schema; there is no "any JSON object" mode to translate
 * json_object to, so a line that may go to an Anthropic offering is refused it.
 */
export function jsonObjectProblem(
  body: ChatBody,
  model: ModelEntry,
  targets: readonly { kind: 'openai' | 'anthropic'; offering: { provider: string } }[],
  at: (field: string) => string,
): BodyProblem | null {
  if (body.response_format?.type !== 'json_object') return null
  const anthropic = targets.filter((t) => t.kind === 'anthropic').map((t) => t.offering.provider)
  if (anthropic.length === 0) return null
  const others = targets.length > anthropic.length
  return {
    path: at('response_format.type'),
    message: `json_object cannot be sent to ${anthropic.join(', ')} (Anthropic's JSON outputs need a schema), which may serve ${model.id}`,
    fix: `use {"type": "json_schema", "json_schema": {"name": "answer", "schema": {…}}}${others ? `, or route the line away with "provider": {"ignore": ${JSON.stringify(anthropic)}}` : ''}`,
  }
}
