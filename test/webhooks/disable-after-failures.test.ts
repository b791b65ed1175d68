/**
 * A webhook whose attempts have all failed for 24 h is disabled (docs/webhooks-and-streams.md)
 * even when a single event is all it had: the deliverer's decisions (attemptResult, the retry
 * schedule) recorded in the real stores, a day of attempts played on the stores' clock (every
 * time is passed in), each attempt a 503.
 */
import { describe, expect } from 'bun:test'
import type { OpenedStore, Store, WebhookRecord } from '../../src/store/store.ts'
import { attemptResult } from '../../src/webhooks/deliver-webhooks.ts'
import { RETRY_WINDOW_MS } from '../../src/webhooks/retry-schedule.ts'
import { newBatch } from '../store/batch-fixtures.ts'
import { newAccount, onEveryStore, T0 } from '../store/every-store.ts'

const HOUR = 3_600_000
/** How long each attempt takes to fail. */
const ATTEMPT_MS = 40

const webhook: WebhookRecord = {
  id: 'whe_a',
  accountId: 'acct_a',
  url: 'https://hooks.example.com/a',
  events: ['batch.cancelled'],
  secret: `whsec_${Buffer.from('whe_a').toString('base64')}`,
  createdAt: T0,
  disabledAt: null,
}

/**
 * One event, every attempt of its delivery failing, from a little after the event until the
 * schedule gives up: the times each attempt failed.
 */
async function failEveryAttempt(store: Store, disableAfterMs?: number) {
  await store.createAccount(newAccount('acct_a'))
  expect(await store.createWebhook(webhook, 20)).toBe(true)
  expect((await store.admitBatch(newBatch('acct_a', 'batch_1', 1))).kind).toBe('created')
  expect((await store.cancelBatch('acct_a', 'batch_1', T0 + 1)).kind).toBe('cancelled')
  const failedAt: number[] = []
  let dueMs = (T0 + 1) * 1000 + 250
  for (let round = 0; round < 100; round++) {
    const claimed = await store.claimDeliveries('inst-1', 10, dueMs, dueMs + 30_000)
    expect(claimed).toHaveLength(1)
    const nowMs = dueMs + ATTEMPT_MS
    const sent = { statusCode: 503, error: 'HTTP 503' }
    const result = attemptResult(claimed[0]!, sent, nowMs, { retryBaseMs: 5_000, disableAfterMs })
    const by = { owner: 'inst-1', nowMs, disableAfterMs }
    expect(await store.finishDelivery(by, claimed[0]!, result)).toBe(true)
    failedAt.push(nowMs)
    if (result.kind !== 'retry') return failedAt
    dueMs = result.atMs
  }
  throw new Error('the delivery was still pending after 100 attempts')
}

onEveryStore(
  ({ name, makeStore, it }) => {
    describe(`a webhook failing its only event (${name})`, () => {
      let opened: OpenedStore

      const deliveries = async () =>
        (await opened.store.listDeliveries('acct_a', 'whe_a', { limit: 10, after: null }))!
          .deliveries

      it('is disabled by the last attempt, 24 h after its first failure', async () => {
        opened = await makeStore()
        try {
          const failedAt = await failEveryAttempt(opened.store)
          const [first, last] = [failedAt[0]!, failedAt.at(-1)!]
          expect(last - first).toBeGreaterThanOrEqual(RETRY_WINDOW_MS)
          expect(last - first).toBeLessThan(RETRY_WINDOW_MS + HOUR)
          const [hook] = await opened.store.listWebhooks('acct_a')
          expect(hook!.disabledAt).toBe(Math.floor(last / 1000))
          expect(await deliveries()).toEqual([
            expect.objectContaining({ status: 'failed', attempts: failedAt.length }),
          ])
          // Disabled: a new event gives it no delivery.
          expect((await opened.store.admitBatch(newBatch('acct_a', 'batch_2', 1))).kind).toBe(
            'created',
          )
          await opened.store.cancelBatch('acct_a', 'batch_2', Math.floor(last / 1000) + 1)
          expect(await deliveries()).toHaveLength(1)
        } finally {
          await opened.store.close()
        }
      })

      it('stays enabled when the threshold ends over an hour past the retry window', async () => {
        opened = await makeStore()
        try {
          const failedAt = await failEveryAttempt(opened.store, 48 * HOUR)
          expect(failedAt.at(-1)! - failedAt[0]!).toBeLessThan(RETRY_WINDOW_MS)
          const [hook] = await opened.store.listWebhooks('acct_a')
          expect(hook!.disabledAt).toBeNull()
          expect(await deliveries()).toEqual([expect.objectContaining({ status: 'failed' })])
        } finally {
          await opened.store.close()
        }
      })
    })
  },
  { file: false },
)
