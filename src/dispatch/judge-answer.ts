/**
 * A chat answer judged against its line's response_format (docs/structured-outputs.md), one rule for
 * the lines run here (run-line.ts) and those a provider's batch API answered
 * (batch-lane/chunk-lifecycle.ts): JSON alone on this thread (a parse is linear in the answer),
 * against a json_schema on a schema thread within its budget. What the verdict makes of the line
 * is judgedError's: not the JSON asked for, failed and not billed; past the budget, failed and
 * billed; else the answer stands.
 */
import { endpointOf } from '../catalog/catalog.ts'
import type { LineError } from '../domain.ts'
import { inlineSchemaChecks } from '../schemas/inline-checks.ts'
import type { JudgeVerdict, SchemaChecks } from '../schemas/schema-checks.ts'
import { answerChoices, answerFormat, judgeChoices } from '../schemas/structured-answer.ts'
import { lineRequest } from './line-request.ts'

const inline = inlineSchemaChecks()

/**
 * The verdict on `response` for a line asking `responseFormat`, its schema judged on `checks`
 * (unset: in-process, inline-checks.ts) in `owner`'s turn. Null: nothing to judge.
 */
export async function judgeAnswer(
  responseFormat: unknown,
  response: Record<string, unknown>,
  owner: string,
  checks?: SchemaChecks,
): Promise<JudgeVerdict | null> {
  const format = answerFormat(responseFormat)
  if (format === null) return null
  const choices = answerChoices(response)
  if (format.schema === null)
    return { checked: true, problem: judgeChoices(format.type, null, choices, null) }
  const job = { text: JSON.stringify(format.schema), name: format.name, choices }
  return (checks ?? inline).judge(job, owner)
}

/** judgeAnswer for a line as stored (its input's text): only a chat-like line has anything to judge. */
export function judgeStoredLine(
  input: string,
  response: Record<string, unknown>,
  owner: string,
  checks?: SchemaChecks,
): Promise<JudgeVerdict | null> {
  const parsed = JSON.parse(input) as { url: string; body: Record<string, unknown> }
  if (endpointOf(parsed.url) !== 'chat') return Promise.resolve(null)
  const request = lineRequest(parsed)
  if ('problem' in request) return Promise.resolve(null)
  return judgeAnswer(request.body.response_format, response, owner, checks)
}

/**
 * What a verdict fails the line with, its answer (`upstream`, in the line's API) kept:
 * structured_output_invalid (never billed), structured_output_unchecked (billed as the answer it
 * is, never past its ceiling: line-ceiling.ts uncheckedCost); null when the answer stands.
 */
export function judgedError(
  verdict: JudgeVerdict | null,
  upstream: Record<string, unknown>,
): LineError | null {
  if (verdict === null) return null
  if (!verdict.checked)
    return { code: 'structured_output_unchecked', message: verdict.unchecked, upstream }
  if (verdict.problem === null) return null
  return { code: 'structured_output_invalid', message: verdict.problem, upstream }
}
