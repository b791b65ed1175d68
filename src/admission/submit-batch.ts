/**
 * Admission of a batch file: validate every line, price the ceiling, then hold and store it in
 * one store transaction. Plain values in, a result out, refusals included; each surface renders it.
 */
import { NO_FINE_TUNES, type FineTuneLookup } from '../catalog/fine-tunes.ts'
import { MESSAGES_URL, newId, type BatchEndpoint, type BatchRecord } from '../domain.ts'
import { refuse, type GatewayError } from '../errors.ts'
import type { Issue, Warning } from '../ingest/issues.ts'
import type { FileValidator } from '../ingest/parallel-validation.ts'
import type { FileLimits } from '../ingest/validate-batch-file.ts'
import { availableUsd, batchHold, Money, moneyText, usd } from '../money/decimal.ts'
import { LONG_WINDOW_HOURS, startBySeconds } from '../store/batches/start-in-time.ts'
import type {
  AccountStore,
  AdmitResult,
  BatchStore,
  DailySpendStore,
  FileStore,
  NewBatch,
} from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'
import { quoteWarnings } from './cap-warnings.ts'
import { registerResultFiles } from './result-files.ts'
import { keysBatch } from './request-hash.ts'
import { noTelemetry, type Telemetry } from '../telemetry/telemetry.ts'

export interface SubmitOptions {
  accountId: string
  name: string | null
  completionWindowHours: number
  idempotencyKey: string | null
  /**
   * With a key: the hash of what the caller sent (request-hash.ts). The key's batch is the answer
   * only to the same request; another is refused 422 idempotency_key_reused.
   */
  requestHash?: string | null
  source: BatchRecord['source']
  metadata: Record<string, string> | null
  inputFileId: string | null
  /** The endpoint the caller declared (OpenAI surface); every line's url must match it. */
  endpoint?: BatchEndpoint
  /** A retry's parent (retry-batch.ts): an ended batch of the same account. */
  parentBatchId?: string | null
  /**
   * wait_for_credit=true (docs/open-models.md): a hold that does not fit waits up to half the window for a
   * deposit, as a `validating` batch, instead of being refused 402. Absent: true for a window of
   * LONG_WINDOW_HOURS or more, on every surface that submits.
   */
  waitForCredit?: boolean
  /** The batch's spend cap (docs/money-and-limits.md), canonical decimal text; null or absent for none. */
  maxCostUsd?: string | null
}

/** A dry run needs only whose credit to compare with, what the lines must be and the cap. */
export type QuoteOptions = Pick<SubmitOptions, 'accountId' | 'source' | 'endpoint' | 'maxCostUsd'>

export type Invalid = { kind: 'invalid'; issues: Issue[]; omitted: number; lineCount: number }

/** A valid file the account cannot take now; each surface renders it (refusalOf, or its own way). */
export type Refused =
  | {
      kind: 'insufficient_quota'
      costCeilingUsd: string
      availableUsd: string
      /** The cap, when it is what was to be held (lower than the ceiling). */
      maxCostUsd?: string
    }
  | { kind: 'limit_exceeded'; limit: number; inUse: number }
  | { kind: 'daily_limit_exceeded'; limitUsd: string; usedUsd: string }

export type SubmitResult = { kind: 'created' | 'duplicate'; batch: BatchRecord } | Invalid | Refused

export type QuoteResult =
  | {
      kind: 'quote'
      lineCount: number
      costCeilingUsd: string
      maxCostUsd: string | null
      creditSufficient: boolean
      availableUsd: string
      /** Whether the hold fits the account's daily spend limit today (true without a limit). */
      dailyLimitSufficient: boolean
      /** What the file's valid lines may run into (docs/open-models.md: a schema that recurses without end). */
      warnings: Warning[]
      warningsOmitted: number
    }
  | Invalid

export interface Admission {
  submit(bytes: Uint8Array, options: SubmitOptions): Promise<SubmitResult>
  /** The dry run: what the file would hold, against the credit available now; nothing is stored. */
  quote(bytes: Uint8Array, options: QuoteOptions): Promise<QuoteResult>
}

/**
 * A refusal in the words every surface uses (docs/money-and-limits.md): the ceiling against the
 * credit, or the limit. `capped`: the surface takes a max_cost_usd (Anthropic's Message Batches
 * have no field for it, so their refusal does not suggest one).
 */
export function refusalOf(result: Refused, capped = true): GatewayError {
  switch (result.kind) {
    case 'insufficient_quota':
      if (result.maxCostUsd !== undefined)
        return refuse(
          'insufficient_quota',
          `the batch's max_cost_usd of $${result.maxCostUsd} (held instead of its cost ceiling of $${result.costCeilingUsd}) exceeds the account's available credit of $${result.availableUsd}; add credit or set a lower max_cost_usd`,
          {
            detail: {
              cost_ceiling_usd: result.costCeilingUsd,
              max_cost_usd: result.maxCostUsd,
              available_usd: result.availableUsd,
            },
          },
        )
      return refuse(
        'insufficient_quota',
        `the batch's cost ceiling of $${result.costCeilingUsd} exceeds the account's available credit of $${result.availableUsd}; add credit, ${capped ? 'set a max_cost_usd the credit covers, ' : ''}or submit fewer lines or a lower max_tokens`,
        { detail: { cost_ceiling_usd: result.costCeilingUsd, available_usd: result.availableUsd } },
      )
    case 'limit_exceeded':
      return refuse(
        'limit_exceeded',
        `the account already has ${result.inUse} open ${result.inUse === 1 ? 'batch' : 'batches'}, its limit; wait for one to finish or cancel one`,
        { detail: { limit: { open_batches: result.limit, in_use: result.inUse } } },
      )
    case 'daily_limit_exceeded':
      return dailyLimitRefusal(result, 'this batch')
  }
}

/** An account's active fine-tunes (the gateway's fine-tune directory). */
export type FineTuneSource = (accountId: string) => Promise<FineTuneLookup>

/**
 * Whether a file may name a fine-tune: an `ft:` id is a JSON string, so its text starts `"ft:`.
 * Most files name none, and their admission does not read the account's fine-tunes at all.
 */
function mentionsFineTune(bytes: Uint8Array): boolean {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).indexOf('"ft:') >= 0
}

/**
 * The daily spend limit's refusal (docs/money-and-limits.md), for a submit and for a live call: the limit and
 * what the day has used, in `error.limit` as the other limits say theirs, and in `Retry-After` the
 * seconds until the limit resets at 00:00 UTC (the SDKs still do not retry it: x-should-retry).
 */
export function dailyLimitRefusal(
  limit: { limitUsd: string; usedUsd: string },
  what: string,
  nowMs = Date.now(),
): GatewayError {
  const resetsInSeconds = Math.ceil((DAY_MS - (nowMs % DAY_MS)) / 1000)
  return refuse(
    'limit_exceeded',
    `${what} would pass the account's daily spend limit of $${limit.limitUsd} ($${usd(limit.usedUsd)} used since 00:00 UTC, batches' holds and live calls included); it resets at 00:00 UTC, in ${resetsIn(resetsInSeconds)}, and a deposit does not raise it`,
    {
      detail: { limit: { daily_spend_usd: limit.limitUsd, used_usd: usd(limit.usedUsd) } },
      headers: { 'retry-after': String(resetsInSeconds) },
    },
  )
}

const DAY_MS = 86_400_000

/** "5 h 3 min", "12 min", "40 s". */
function resetsIn(seconds: number): string {
  const hours = Math.floor(seconds / 3600)
  const minutes = Math.floor((seconds % 3600) / 60)
  if (hours > 0) return `${hours} h ${minutes} min`
  return minutes > 0 ? `${minutes} min` : `${seconds} s`
}

/** What admission works with: where batches go, who validates, who hears of a new batch. */
export interface AdmissionDeps {
  store: BatchStore &
    AccountStore &
    Pick<FileStore, 'createFile'> &
    Pick<DailySpendStore, 'getDailySpend'>
  validator: FileValidator
  /** Called with each batch admitted (a log line, the dispatcher's nudge). */
  onAdmitted?: (batch: BatchRecord) => void
  telemetry?: Telemetry
  /** An account's active fine-tunes; none when absent. */
  fineTunes?: FineTuneSource
  logger?: Logger
  /**
   * Hands back what this instance's live calls lease of the account's credit and do not use
   * (LiveCredit.handBack), true when there was some: asked when a hold does not fit, which is
   * then weighed again, so that a live call just made does not leave a batch refused for credit
   * nobody uses.
   */
  releaseLiveLease: (accountId: string) => Promise<boolean>
}

export interface AdmissionOptions {
  limits: FileLimits
  /** Unix ms; the clock the daily limit's day is read from. */
  now?: () => number
}

/**
 * A quote's hold against the account now, as a submit's admission checks it in the store: the
 * credit available, and the day's use with this hold within the daily spend limit.
 */
async function holdFits(
  store: AccountStore & Pick<DailySpendStore, 'getDailySpend'>,
  account: { id: string; nowMs: number },
  hold: string,
) {
  const view = await store.getAccount(account.id)
  const free = view ? availableUsd(view) : new Money(0)
  const daily = await store.getDailySpend(account.id, account.nowMs)
  const dailyLimitSufficient =
    daily?.limitUsd == null || new Money(daily.usedUsd).plus(hold).lessThanOrEqualTo(daily.limitUsd)
  return { free, creditSufficient: free.greaterThanOrEqualTo(hold), dailyLimitSufficient }
}

export function createAdmission(deps: AdmissionDeps, options: AdmissionOptions): Admission {
  const { store, validator, releaseLiveLease } = deps
  const onAdmitted = deps.onAdmitted ?? (() => {})
  const telemetry = deps.telemetry ?? noTelemetry
  const fineTunes: FineTuneSource = deps.fineTunes ?? (async () => NO_FINE_TUNES)
  const { limits } = options
  const now = options.now ?? Date.now
  /** Every line valid, and of the declared endpoint when there is one. */
  async function check(bytes: Uint8Array, options: QuoteOptions) {
    const lookup = mentionsFineTune(bytes) ? await fineTunes(options.accountId) : NO_FINE_TUNES
    // A capped batch stores each line's own ceiling, which the claim checks against the cap.
    // Messages API lines only where the batch is declared a Message Batches one (or its retry).
    const fileLimits = options.endpoint === MESSAGES_URL ? { ...limits, messagesUrl: true } : limits
    const verdict = await validator.validate(bytes, fileLimits, lookup, {
      lineCeilings: Boolean(options.maxCostUsd),
      owner: options.accountId,
    })
    if (!verdict.ok) {
      return {
        kind: 'invalid',
        issues: verdict.issues,
        omitted: verdict.omitted,
        lineCount: verdict.lineCount,
      } satisfies Invalid
    }
    if (options.endpoint && verdict.endpoint !== options.endpoint) {
      const first = verdict.lines[0]
      const issue = {
        line: first.lineNo,
        custom_id: first.customId,
        path: 'url',
        message: `is ${verdict.endpoint} but the batch's endpoint is ${options.endpoint}`,
        fix: `set url to ${options.endpoint} on every line, or create the batch with endpoint ${verdict.endpoint}`,
      }
      return {
        kind: 'invalid',
        issues: [issue],
        omitted: 0,
        lineCount: verdict.lines.length,
      } satisfies Invalid
    }
    return verdict
  }

  async function quote(bytes: Uint8Array, options: QuoteOptions): Promise<QuoteResult> {
    // Under a cap, each line's own ceiling too: a line whose ceiling alone passes the cap is named.
    const verdict = await check(bytes, options)
    if ('kind' in verdict) return verdict
    const hold = batchHold(verdict.ceiling.toFixed(), options.maxCostUsd)
    const weigh = () => holdFits(store, { id: options.accountId, nowMs: now() }, hold)
    const fits = await weighOrHandBack(weigh, () => releaseLiveLease(options.accountId))
    return {
      kind: 'quote',
      lineCount: verdict.lines.length,
      costCeilingUsd: usd(verdict.ceiling.toFixed()),
      maxCostUsd: options.maxCostUsd ? moneyText(options.maxCostUsd) : null,
      creditSufficient: fits.creditSufficient,
      availableUsd: usd(fits.free),
      dailyLimitSufficient: fits.dailyLimitSufficient,
      ...quoteWarnings(verdict, options.maxCostUsd),
    }
  }

  async function submit(bytes: Uint8Array, options: SubmitOptions): Promise<SubmitResult> {
    const key = options.idempotencyKey
    const existing = key ? await store.findByIdempotencyKey(options.accountId, key) : null
    if (existing) return sameRequest(existing, options.requestHash)
    const verdict = await check(bytes, options)
    if ('kind' in verdict) return verdict
    const ceiling = verdict.ceiling.toFixed()
    const createdAt = Math.floor(now() / 1000)
    // Half the window (docs/open-models.md): the rest is left for the batch to run once credit
    // comes. Never past the time by which it must start (48 hours from a 72-hour window on):
    // credit that came later would start a batch the start-in-time rule ends at once.
    const waits = waitsForCredit(options.waitForCredit, options.completionWindowHours)
    const hours = options.completionWindowHours
    const creditWaitUntil = waits ? createdAt + Math.min(hours * 1800, startBySeconds(hours)) : null
    const result = await admitOrHandBack(store, releaseLiveLease, waits, {
      id: newId('batch_'),
      accountId: options.accountId,
      name: options.name,
      endpoint: verdict.endpoint,
      completionWindowHours: options.completionWindowHours,
      createdAt,
      deadlineAt: createdAt + options.completionWindowHours * 3600,
      costCeilingUsd: ceiling,
      maxCostUsd: options.maxCostUsd ?? null,
      lineCount: verdict.lines.length,
      source: options.source,
      metadata: options.metadata,
      inputFileId: options.inputFileId,
      idempotencyKey: options.idempotencyKey,
      requestHash: options.requestHash ?? null,
      parentBatchId: options.parentBatchId ?? null,
      lines: verdict.lines,
      creditWaitUntil,
    })
    switch (result.kind) {
      case 'created':
        // After the batch's own transaction: a store that fails here leaves the batch admitted
        // (its answer a 201, not a 500 that would be submitted again), its files unlisted.
        await registerResultFiles(store, result.batch).catch((error: Error) =>
          deps.logger?.warn('batch.result_files_failed', {
            batch_id: result.batch.id,
            reason: error.message,
          }),
        )
        onAdmitted(result.batch)
        return result
      case 'duplicate':
        return sameRequest(result.batch, options.requestHash)
      case 'insufficient_quota':
        return {
          kind: 'insufficient_quota',
          costCeilingUsd: usd(ceiling),
          availableUsd: usd(result.availableUsd),
          ...(options.maxCostUsd && new Money(options.maxCostUsd).lessThan(ceiling)
            ? { maxCostUsd: usd(options.maxCostUsd) }
            : {}),
        }
      case 'limit_exceeded':
        telemetry.rateLimited('open_batches')
        return result
      case 'daily_limit_exceeded':
        telemetry.rateLimited('daily_spend')
        return result
    }
  }

  // One span per admission, whatever the verdict: the batch's id, size and ceiling.
  const attributes = (options: QuoteOptions, dryRun: boolean) => ({
    'account.id': options.accountId,
    'batch.source': options.source,
    'batch.dry_run': dryRun,
  })
  return {
    submit: (bytes, options) =>
      telemetry.admission(
        attributes(options, false),
        () => submit(bytes, options),
        describeAdmission,
      ),
    quote: (bytes, options) =>
      telemetry.admission(
        attributes(options, true),
        () => quote(bytes, options),
        describeAdmission,
      ),
  }
}

/** A quote's `weigh`, done again once the live block was handed back when short (admitOrHandBack). */
async function weighOrHandBack<
  T extends { creditSufficient: boolean; dailyLimitSufficient: boolean },
>(weigh: () => Promise<T>, handBack: () => Promise<boolean>): Promise<T> {
  const fits = await weigh()
  if (fits.creditSufficient && fits.dailyLimitSufficient) return fits
  return (await handBack()) ? weigh() : fits
}

/**
 * Admits `batch`. What this instance's live calls hold of the account unused goes back when its
 * hold does not fit, and the hold is weighed again; a batch that would wait for credit, never
 * refused, hands it back first.
 */
async function admitOrHandBack(
  store: Pick<BatchStore, 'admitBatch'>,
  releaseLiveLease: (accountId: string) => Promise<boolean>,
  waits: boolean,
  batch: NewBatch,
): Promise<AdmitResult> {
  if (waits) await releaseLiveLease(batch.accountId)
  const result = await store.admitBatch(batch)
  const short = result.kind === 'insufficient_quota' || result.kind === 'daily_limit_exceeded'
  if (!short || waits || !(await releaseLiveLease(batch.accountId))) return result
  return store.admitBatch(batch)
}

function describeAdmission(result: SubmitResult | QuoteResult): Record<string, string | number> {
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
      return {
        'batch.result': 'quote',
        'batch.line_count': result.lineCount,
        'batch.cost_ceiling_usd': result.costCeilingUsd,
      }
    case 'invalid':
      return {
        'batch.result': 'invalid',
        'batch.line_count': result.lineCount,
        'batch.issue_count': result.issues.length + result.omitted,
      }
    case 'insufficient_quota':
      return {
        'batch.result': 'insufficient_quota',
        'batch.cost_ceiling_usd': result.costCeilingUsd,
      }
    case 'limit_exceeded':
    case 'daily_limit_exceeded':
      return { 'batch.result': result.kind }
  }
}

/** The key's batch as a submit's answer: to the same request only (request-hash.ts keysBatch). */
export const sameRequest = (
  existing: BatchRecord,
  hash: string | null | undefined,
): { kind: 'duplicate'; batch: BatchRecord } => ({
  kind: 'duplicate',
  batch: keysBatch(existing, hash),
})

/** Whether a batch waits for a deposit when its hold does not fit: as asked, else by its window. */
export const waitsForCredit = (asked: boolean | undefined, hours: number) =>
  asked ?? hours >= LONG_WINDOW_HOURS
