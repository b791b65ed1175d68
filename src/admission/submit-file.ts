/**
 * The native submit as a service: one JSONL file and its options in, a quote or an admission's
 * answer out. `POST /v1/batches` (http/native-batches.ts) and the dashboard's upload form
 * (http/dashboard/) both submit through it, so the two cannot drift apart; each renders the
 * result its own way (JSON, a page).
 */
import { answerOf, type AdmissionAnswer } from './admission-answer.ts'
import { bodyDigest, requestHash } from './request-hash.ts'
import {
  waitsForCredit,
  type Admission,
  type QuoteResult,
  type SubmitOptions,
} from './submit-batch.ts'

/** What a native submit names, from the query or the form's fields. */
export interface FileSubmit {
  accountId: string
  name: string | null
  completionWindowHours: number
  idempotencyKey: string | null
  /** The batch's spend cap (docs/money-and-limits.md); null for none. */
  maxCostUsd: string | null
  /** docs/open-models.md; absent leaves it to admission. */
  waitForCredit?: boolean
  /** A dry run: the quote only, nothing stored. */
  dryRun: boolean
}

export type FileSubmitResult = Extract<QuoteResult, { kind: 'quote' }> | AdmissionAnswer

/** A file whose first bytes are gzip's magic number: a compressed upload the reader cannot take. */
export const isGzipped = (bytes: Uint8Array) => bytes[0] === 0x1f && bytes[1] === 0x8b

export async function submitFile(
  admission: Admission,
  bytes: Uint8Array,
  submit: FileSubmit,
): Promise<FileSubmitResult> {
  const options: SubmitOptions = {
    accountId: submit.accountId,
    name: submit.name,
    completionWindowHours: submit.completionWindowHours,
    idempotencyKey: submit.idempotencyKey,
    // A dry run stores nothing, so no key is kept or compared.
    requestHash: submit.idempotencyKey && !submit.dryRun ? await fileHash(bytes, submit) : null,
    source: 'native',
    metadata: null,
    inputFileId: null,
    ...('waitForCredit' in submit ? { waitForCredit: submit.waitForCredit } : {}),
    maxCostUsd: submit.maxCostUsd,
  }
  if (submit.dryRun) {
    const quote = await admission.quote(bytes, options)
    if (quote.kind === 'quote') return quote
    return answerOf(quote)
  }
  return answerOf(await admission.submit(bytes, options))
}

/** The query's or the form's dry_run flag. */
export const isDryRun = (flag: string | undefined) => flag === 'true' || flag === '1'

/** A flag as isDryRun reads it, or undefined when it was not sent (the option's default then). */
export const optionalFlag = (flag: string | undefined) =>
  flag === undefined ? undefined : isDryRun(flag)

/** A native submit's request, as request-hash.ts hashes it: the file and the options it names. */
const fileHash = async (bytes: Uint8Array, submit: FileSubmit) =>
  requestHash(await bodyDigest(bytes), {
    name: submit.name,
    completion_window_hours: submit.completionWindowHours,
    max_cost_usd: submit.maxCostUsd,
    // Left out or sent as its default, one request.
    wait_for_credit: waitsForCredit(submit.waitForCredit, submit.completionWindowHours),
  })
