/**
 * What the batch and dispatch contracts (batches.test.ts, dispatch.test.ts) share: a batch to
 * admit with its lines, outcomes to record, and the calls their tests make on a store, each
 * given the store of the test that runs (storeHelpers).
 */
import type { LineError } from '../../src/domain.ts'
import type {
  DispatchStore,
  LineOutcome,
  NewAccount,
  NewBatch,
  NewLine,
  Store,
} from '../../src/store/store.ts'
import { DAY, MS, newAccount, T0 } from './every-store.ts'

/** The calls a batch or dispatch contract test makes, on the store `current()` gives. */
export function storeHelpers(current: () => { store: Store; dispatch: DispatchStore }) {
  const account = (id: string, creditUsd = '100', extra: Partial<NewAccount> = {}) =>
    current().store.createAccount(newAccount(id, creditUsd, extra))

  const admit = async (
    accountId: string,
    id: string,
    lineCount = 3,
    extra: Partial<NewBatch> = {},
  ) => {
    const result = await current().store.admitBatch(newBatch(accountId, id, lineCount, extra))
    if (result.kind !== 'created') throw new Error(`expected created, got ${result.kind}`)
    return result.batch
  }

  const claim = (batchId: string, owner: string, limit: number, atMs = MS, leaseMs = 60_000) =>
    current().dispatch.claimLines({
      batchId,
      owner,
      limit,
      nowMs: atMs,
      leaseUntilMs: atMs + leaseMs,
    })

  /** A live credit lease of acct_1 for `instanceId`, for 10 s from `nowMs`. */
  const take = (instanceId: string, needUsd: string, wantUsd: string, nowMs = MS) =>
    current().store.takeLiveCredit({
      instanceId,
      accountId: 'acct_1',
      needUsd,
      wantUsd,
      nowMs,
      expiresAtMs: nowMs + 10_000,
    })
  const batchOf = async (accountId: string, id: string) =>
    (await current().store.getBatch(accountId, id))!
  const allLines = (batchId: string) =>
    current().store.readLines(batchId, { afterLineNo: 0, limit: 100_000, statuses: null })
  return { account, admit, claim, take, batchOf, allLines }
}

export const RESPONSE = '{"id":"chatcmpl-1","object":"chat.completion","usage":{"prompt_tokens":9}}'

/** ~330 bytes, like a real chat line. */
export const inputOf = (n: number) =>
  JSON.stringify({
    custom_id: `c-${n}`,
    method: 'POST',
    url: '/v1/chat/completions',
    body: {
      model: 'openai/gpt-5-nano',
      max_tokens: 256,
      messages: [
        { role: 'user', content: `Summarise ticket ${n}: "printer on fire" \\ ${'x'.repeat(180)}` },
      ],
    },
  })

export const lineList = (count: number): NewLine[] =>
  Array.from({ length: count }, (_, i) => ({
    lineNo: i + 1,
    customId: `c-${i + 1}`,
    input: inputOf(i + 1),
  }))

export function newBatch(
  accountId: string,
  id: string,
  lineCount = 3,
  extra: Partial<NewBatch> = {},
): NewBatch {
  return {
    id,
    accountId,
    name: null,
    endpoint: '/v1/chat/completions',
    completionWindowHours: 24,
    createdAt: T0,
    deadlineAt: T0 + DAY,
    costCeilingUsd: '1',
    lineCount,
    source: 'native',
    metadata: null,
    inputFileId: null,
    idempotencyKey: null,
    lines: lineList(lineCount),
    ...extra,
  }
}

export const succeeded = (batchId: string, lineNo: number, costUsd: string): LineOutcome => ({
  batchId,
  lineNo,
  kind: 'succeeded',
  responseStatus: 200,
  response: RESPONSE,
  costUsd,
  provider: 'openai',
  latencyMs: 812,
})

export const failed = (
  batchId: string,
  lineNo: number,
  error: LineError,
  costUsd = '0',
): LineOutcome => ({
  batchId,
  lineNo,
  kind: 'failed',
  error,
  responseStatus: 400,
  costUsd,
  provider: 'openai',
  latencyMs: 40,
})

export const retry = (batchId: string, lineNo: number, notBefore: number): LineOutcome => ({
  batchId,
  lineNo,
  kind: 'retry',
  notBefore,
})
