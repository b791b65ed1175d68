/**
 * One table from an admission's result to what every surface answers (docs/native-api.md, docs/money-and-limits.md, docs/webhooks-and-streams.md): the
 * native submit, the facade's batches.create, the dashboard's form, a retry (native and
 * dashboard) and a submit that waits for credit all pass their result through `answerOf`, so a
 * refusal reads the same wherever it was met. A result kind with no row here fails the type check
 * (the switch is exhaustive), and test/native/admission-answers.test.ts drives every path to
 * every kind in `SUBMIT_RESULT_KINDS` over HTTP. The retry route once lacked
 * `daily_limit_exceeded` and answered an empty 200.
 */
import type { BatchRecord } from '../domain.ts'
import type { GatewayError } from '../errors.ts'
import type { Issue } from '../ingest/issues.ts'
import { refusalOf, type Refused, type SubmitResult } from './submit-batch.ts'

/** Every kind a submit or a retry may end in; the check below keeps it whole. */
export const SUBMIT_RESULT_KINDS = [
  'created',
  'duplicate',
  'invalid',
  'insufficient_quota',
  'limit_exceeded',
  'daily_limit_exceeded',
] as const satisfies readonly SubmitResult['kind'][]

type Unlisted = Exclude<SubmitResult['kind'], (typeof SUBMIT_RESULT_KINDS)[number]>
/** A kind added to SubmitResult but not to the list above is a type error here. */
export const ALL_KINDS_LISTED: [Unlisted] extends [never] ? true : Unlisted = true

/** What a surface renders, in its own format (JSON, the OpenAI shape, an HTML page). */
export type AdmissionAnswer =
  /** 201 for a new batch, 200 for the one an idempotency key found. */
  | { kind: 'batch'; status: 200 | 201; batch: BatchRecord }
  /** 400 invalid_batch_file, with the line-numbered issues. */
  | { kind: 'invalid'; issues: Issue[]; omitted: number }
  /** The refusal's own status (402, 429) and envelope. */
  | { kind: 'refused'; refusal: Refused; error: GatewayError }

export function answerOf(result: SubmitResult): AdmissionAnswer {
  switch (result.kind) {
    case 'created':
      return { kind: 'batch', status: 201, batch: result.batch }
    case 'duplicate':
      return { kind: 'batch', status: 200, batch: result.batch }
    case 'invalid':
      return { kind: 'invalid', issues: result.issues, omitted: result.omitted }
    case 'insufficient_quota':
    case 'limit_exceeded':
    case 'daily_limit_exceeded':
      return { kind: 'refused', refusal: result, error: refusalOf(result) }
    default:
      return unanswered(result)
  }
}

/**
 * The `default` of every switch over results or answers: a kind that reaches it is a type error
 * at compile time, and a 500 (never an empty 200) should one slip past.
 */
export function unanswered(value: never): never {
  throw new Error(`admission result with no answer: ${JSON.stringify(value)}`)
}
