/**
 * Admission of a batch file: validate every line, price the ceiling, then hold and store it in
 * one store transaction. Plain values in, a result out; the HTTP layers render it.
 */
import { newId, nowSeconds, type BatchEndpoint, type BatchRecord } from '../domain.ts'
import { GatewayError } from '../errors.ts'
import type { Issue } from '../ingest/issues.ts'
import type { FileValidator } from '../ingest/parallel-validation.ts'
import type { FileLimits } from '../ingest/validate-batch-file.ts'
import { availableUsd, Money, usd } from '../money/decimal.ts'
import type { AccountStore, BatchStore } from '../store/store.ts'
import { noTelemetry, type Telemetry } from '../telemetry/telemetry.ts'

export interface SubmitOptions {
  accountId: string
  name: string | null
  completionWindowHours: number
  dryRun: boolean
  idempotencyKey: string | null
  source: 'native' | 'openai'
  metadata: Record<string, string> | null
  inputFileId: string | null
  /** The endpoint the caller declared (OpenAI surface); every line's url must match it. */
  endpoint?: BatchEndpoint
}

export type SubmitResult =
  | { kind: 'created' | 'duplicate'; batch: BatchRecord }
  | { kind: 'quote'; lineCount: number; costCeilingUsd: string; creditSufficient: boolean; availableUsd: string }
  | { kind: 'invalid'; issues: Issue[]; omitted: number; lineCount: number }

export interface Admission {
  submit(bytes: Uint8Array, options: SubmitOptions): Promise<SubmitResult>
}

export function createAdmission(
  store: BatchStore & AccountStore,
  validator: FileValidator,
  limits: FileLimits,
  onAdmitted: (batch: BatchRecord) => void = () => {},
  telemetry: Telemetry = noTelemetry,
): Admission {
  const admission: Admission = {
    async submit(bytes, options) {
      if (options.idempotencyKey && !options.dryRun) {
        const existing = await store.findByIdempotencyKey(options.accountId, options.idempotencyKey)
        if (existing) return { kind: 'duplicate', batch: existing }
      }
      const verdict = await validator.validate(bytes, limits)
      if (!verdict.ok) return { kind: 'invalid', issues: verdict.issues, omitted: verdict.omitted, lineCount: verdict.lineCount }
      if (options.endpoint && verdict.endpoint !== options.endpoint) {
        const first = verdict.lines[0]
        const issue = {
          line: first.lineNo,
          custom_id: first.customId,
          path: 'url',
          message: `is ${verdict.endpoint} but the batch's endpoint is ${options.endpoint}`,
          fix: `set url to ${options.endpoint} on every line, or create the batch with endpoint ${verdict.endpoint}`,
        }
        return { kind: 'invalid', issues: [issue], omitted: 0, lineCount: verdict.lines.length }
      }
      const ceiling = verdict.ceiling.toFixed()
      if (options.dryRun) {
        const account = await store.getAccount(options.accountId)
        const free = account ? availableUsd(account) : new Money(0)
        return {
          kind: 'quote',
          lineCount: verdict.lines.length,
          costCeilingUsd: usd(ceiling),
          creditSufficient: verdict.ceiling.lessThanOrEqualTo(free),
          availableUsd: usd(free),
        }
      }
      const createdAt = nowSeconds()
      const result = await store.admitBatch({
        id: newId('batch_'),
        accountId: options.accountId,
        name: options.name,
        endpoint: verdict.endpoint,
        completionWindowHours: options.completionWindowHours,
        createdAt,
        deadlineAt: createdAt + options.completionWindowHours * 3600,
        costCeilingUsd: ceiling,
        lineCount: verdict.lines.length,
        source: options.source,
        metadata: options.metadata,
        inputFileId: options.inputFileId,
        idempotencyKey: options.idempotencyKey,
        lines: verdict.lines,
      })
      switch (result.kind) {
        case 'created':
          onAdmitted(result.batch)
          return result
        case 'duplicate':
          return result
        case 'insufficient_quota':
          throw new GatewayError(
            402,
            'insufficient_quota',
            'insufficient_quota',
            `the batch's cost ceiling of $${usd(ceiling)} exceeds the account's available credit of $${usd(result.availableUsd)}; add credit or submit fewer lines or a lower max_tokens`,
            { detail: { cost_ceiling_usd: usd(ceiling), available_usd: usd(result.availableUsd) } },
          )
        case 'limit_exceeded':
          telemetry.rateLimited('open_batches')
          throw new GatewayError(
            429,
            'rate_limit_error',
            'limit_exceeded',
            `the account already has ${result.inUse} open batches, its limit; wait for one to finish or cancel one`,
            { detail: { limit: { open_batches: result.limit, in_use: result.inUse } } },
          )
      }
    },
  }
  // One span per admission, whatever the verdict: the batch's id, size and ceiling.
  return {
    submit: (bytes, options) =>
      telemetry.admission(
        { 'account.id': options.accountId, 'batch.source': options.source, 'batch.dry_run': options.dryRun },
        () => admission.submit(bytes, options),
        describeAdmission,
      ),
  }
}

function describeAdmission(result: SubmitResult): Record<string, string | number> {
  switch (result.kind) {
    case 'created':
    case 'duplicate':
      return {
        'batch.result': result.kind,
        'batch.id': result.batch.id,
        'batch.line_count': result.batch.counts.total,
        'batch.cost_ceiling_usd': usd(result.batch.costCeilingUsd),
      }
    case 'quote':
      return { 'batch.result': 'quote', 'batch.line_count': result.lineCount, 'batch.cost_ceiling_usd': result.costCeilingUsd }
    case 'invalid':
      return { 'batch.result': 'invalid', 'batch.line_count': result.lineCount, 'batch.issue_count': result.issues.length + result.omitted }
  }
}
