/**
 * The webhook part of the store contract (docs/events-and-webhooks.md), run by test/store/webhooks.test.ts on
 * every store: endpoints per account, the outbox written with each terminal status, and deliveries leased to one instance at a time.
 */
import { describe, expect, test } from 'bun:test'
import type { WebhookEventType } from '../../src/domain.ts'
import type { DispatchStore, OpenedStore, Store, WebhookRecord } from '../../src/store/store.ts'
import { newBatch } from './batch-fixtures.ts'
import { freshStoreEachTest } from './every-store.ts'

const T0 = 1_764_460_000
const MS = T0 * 1000
const ALL: WebhookEventType[] = [
  'batch.completed',
  'batch.failed',
  'batch.cancelled',
  'batch.expired',
]

export function runWebhookStoreContract(name: string, makeStore: () => Promise<OpenedStore>) {
  let store: Store
  let dispatch: DispatchStore

  const account = (id: string) =>
    store.createAccount({
      id,
      name: id,
      creditUsd: '100',
      maxOpenBatches: 10,
      rateLimitPerMinute: 600,
      createdAt: T0,
    })

  const webhook = (id: string, accountId: string, events = ALL): WebhookRecord => ({
    id,
    accountId,
    url: `https://hooks.example.com/${id}`,
    events,
    secret: `whsec_${Buffer.from(id).toString('base64')}`,
    createdAt: T0,
    disabledAt: null,
  })

  /** A one-line batch run to its end: succeeded (completed) or failed. */
  async function finish(accountId: string, batchId: string, outcome: 'succeeded' | 'failed') {
    const admitted = await store.admitBatch(newBatch(accountId, batchId, 1))
    if (admitted.kind !== 'created') throw new Error(admitted.kind)
    await dispatch.claimLines({
      batchId,
      owner: 'line-owner',
      limit: 1,
      nowMs: MS,
      leaseUntilMs: MS + 60_000,
    })
    await dispatch.recordOutcomes(
      'line-owner',
      [
        outcome === 'succeeded'
          ? {
              batchId,
              lineNo: 1,
              kind: 'succeeded',
              responseStatus: 200,
              response: '{}',
              costUsd: '0.01',
              provider: 'openai',
              latencyMs: 5,
            }
          : {
              batchId,
              lineNo: 1,
              kind: 'failed',
              error: { code: 'invalid_request', message: 'bad' },
              responseStatus: 400,
              costUsd: '0',
              provider: 'openai',
              latencyMs: 5,
            },
      ],
      MS + 100,
    )
    await dispatch.advanceBatches(T0 + 1)
    await dispatch.advanceBatches(T0 + 2)
  }

  const deliveries = async (accountId: string, webhookId: string) =>
    (await store.listDeliveries(accountId, webhookId, { limit: 100, after: null }))!.deliveries

  describe.serial(`webhook store contract: ${name}`, () => {
    freshStoreEachTest(makeStore, (opened) => {
      store = opened.store
      dispatch = opened.dispatch
    })

    test('creates, lists newest first and deletes an account’s webhooks; another account’s are not there', async () => {
      await account('acct_1')
      await account('acct_2')
      expect(await store.createWebhook(webhook('whe_1', 'acct_1'), 2)).toBe(true)
      expect(await store.createWebhook(webhook('whe_2', 'acct_1', ['batch.failed']), 2)).toBe(true)
      // The limit counts per account.
      expect(await store.createWebhook(webhook('whe_3', 'acct_1'), 2)).toBe(false)
      expect(await store.createWebhook(webhook('whe_4', 'acct_2'), 2)).toBe(true)
      expect(await store.listWebhooks('acct_1')).toEqual([
        webhook('whe_2', 'acct_1', ['batch.failed']),
        webhook('whe_1', 'acct_1'),
      ])
      expect(await store.deleteWebhook('acct_2', 'whe_1')).toBe(false)
      expect(await store.listDeliveries('acct_2', 'whe_1', { limit: 10, after: null })).toBeNull()
      expect(await store.deleteWebhook('acct_1', 'whe_1')).toBe(true)
      expect(await store.deleteWebhook('acct_1', 'whe_1')).toBe(false)
      expect((await store.listWebhooks('acct_1')).map((w) => w.id)).toEqual(['whe_2'])
      expect((await store.listWebhooks('acct_2')).map((w) => w.id)).toEqual(['whe_4'])
    })

    test('a batch’s terminal status enqueues one delivery per webhook asking for its event, with one event id', async () => {
      await account('acct_1')
      await account('acct_2')
      await store.createWebhook(webhook('whe_a', 'acct_1'), 10)
      await store.createWebhook(webhook('whe_b', 'acct_1', ['batch.completed']), 10)
      await store.createWebhook(webhook('whe_c', 'acct_1', ['batch.failed']), 10)
      await store.createWebhook(webhook('whe_d', 'acct_2'), 10)
      await finish('acct_1', 'batch_01', 'succeeded')
      expect((await store.getBatch('acct_1', 'batch_01'))!.status).toBe('completed')
      const [a] = await deliveries('acct_1', 'whe_a')
      expect(a).toEqual({
        webhookId: 'whe_a',
        eventId: expect.stringMatching(/^evt_[0-9a-f]{28}$/),
        type: 'batch.completed',
        batchId: 'batch_01',
        createdAt: T0 + 2,
        status: 'pending',
        attempts: 0,
        nextAttemptAtMs: (T0 + 2) * 1000,
        lastAttemptAt: null,
        lastStatusCode: null,
        lastError: null,
        deliveredAt: null,
      })
      const b = await deliveries('acct_1', 'whe_b')
      expect(b.map((d) => [d.eventId, d.type])).toEqual([[a!.eventId, 'batch.completed']])
      expect(await deliveries('acct_1', 'whe_c')).toEqual([])
      // Another account's webhook hears nothing of this account's batches.
      expect(await deliveries('acct_2', 'whe_d')).toEqual([])

      await finish('acct_1', 'batch_02', 'failed')
      expect((await deliveries('acct_1', 'whe_c')).map((d) => [d.type, d.batchId])).toEqual([
        ['batch.failed', 'batch_02'],
      ])
      // Newest first.
      expect((await deliveries('acct_1', 'whe_a')).map((d) => d.batchId)).toEqual([
        'batch_02',
        'batch_01',
      ])
      // Nothing is enqueued twice: later ticks find nothing to finish.
      await dispatch.advanceBatches(T0 + 10)
      expect(await deliveries('acct_1', 'whe_a')).toHaveLength(2)
    })

    test('cancelling, expiring and a refused facade batch each enqueue their event', async () => {
      await account('acct_1')
      await store.createWebhook(webhook('whe_a', 'acct_1'), 10)
      // Cancelled with nothing running: it ends at once, in the cancel's transaction.
      await store.admitBatch(newBatch('acct_1', 'batch_c', 2))
      expect((await store.cancelBatch('acct_1', 'batch_c', T0 + 5)).kind).toBe('cancelled')
      // Past its deadline with nothing run.
      await store.admitBatch(newBatch('acct_1', 'batch_e', 2, { deadlineAt: T0 + 60 }))
      await dispatch.advanceBatches(T0 + 61)
      await dispatch.advanceBatches(T0 + 62)
      await store.recordRejectedBatch({
        id: 'batch_r',
        accountId: 'acct_1',
        name: null,
        endpoint: '/v1/chat/completions',
        completionWindowHours: 24,
        createdAt: T0 + 70,
        idempotencyKey: null,
        source: 'openai',
        metadata: null,
        inputFileId: 'file_1',
        errors: [{ code: 'invalid_request', message: 'bad', param: null, line: 1 }],
      })
      const byBatch = Object.fromEntries(
        (await deliveries('acct_1', 'whe_a')).map((d) => [d.batchId, [d.type, d.createdAt]]),
      )
      expect(byBatch).toEqual({
        batch_c: ['batch.cancelled', T0 + 5],
        batch_e: ['batch.expired', T0 + 62],
        batch_r: ['batch.failed', T0 + 70],
      })
    })

    test('a claim leases a delivery to one owner; an expired lease goes to another, and only the holder records', async () => {
      await account('acct_1')
      await store.createWebhook(webhook('whe_a', 'acct_1'), 10)
      await finish('acct_1', 'batch_01', 'succeeded')
      const now = (T0 + 3) * 1000
      const [claimed, ...more] = await store.claimDeliveries('inst-a', 10, now, now + 30_000)
      expect(more).toEqual([])
      expect(claimed).toMatchObject({
        webhookId: 'whe_a',
        type: 'batch.completed',
        batchId: 'batch_01',
        attempts: 1,
        url: 'https://hooks.example.com/whe_a',
        secret: webhook('whe_a', 'acct_1').secret,
      })
      // Leased: no one else gets it, not even once it is due by its original time.
      expect(await store.claimDeliveries('inst-b', 10, now + 29_999, now + 60_000)).toEqual([])
      // inst-a died: its lease runs out and inst-b takes it, the attempt counted again.
      const [again] = await store.claimDeliveries('inst-b', 10, now + 30_000, now + 60_000)
      expect(again).toMatchObject({ eventId: claimed!.eventId, attempts: 2 })
      const key = { webhookId: 'whe_a', eventId: claimed!.eventId }
      // inst-a's late answer is not recorded over inst-b's claim.
      expect(
        await store.finishDelivery({ owner: 'inst-a', nowMs: now }, key, {
          kind: 'delivered',
          statusCode: 200,
        }),
      ).toBe(false)
      expect(
        await store.finishDelivery({ owner: 'inst-b', nowMs: now + 31_000 }, key, {
          kind: 'delivered',
          statusCode: 204,
        }),
      ).toBe(true)
      expect((await deliveries('acct_1', 'whe_a'))[0]).toMatchObject({
        status: 'delivered',
        attempts: 2,
        lastStatusCode: 204,
        lastError: null,
        deliveredAt: T0 + 34,
        nextAttemptAtMs: null,
      })
      // Delivered is final.
      expect(await store.claimDeliveries('inst-c', 10, now + 10_000_000, now + 10_030_000)).toEqual(
        [],
      )
    })

    test('a retry is due at its time, a failure is final, and a release hands the claim back uncounted', async () => {
      await account('acct_1')
      await store.createWebhook(webhook('whe_a', 'acct_1'), 10)
      await finish('acct_1', 'batch_01', 'succeeded')
      await finish('acct_1', 'batch_02', 'succeeded')
      const now = (T0 + 3) * 1000
      const claimed = await store.claimDeliveries('inst-a', 10, now, now + 30_000)
      expect(claimed.map((d) => d.batchId).sort()).toEqual(['batch_01', 'batch_02'])
      const one = claimed.find((d) => d.batchId === 'batch_01')!
      const two = claimed.find((d) => d.batchId === 'batch_02')!
      await store.finishDelivery({ owner: 'inst-a', nowMs: now + 100 }, one, {
        kind: 'retry',
        atMs: now + 5_000,
        statusCode: 500,
        error: 'HTTP 500',
      })
      await store.finishDelivery({ owner: 'inst-a', nowMs: now + 100 }, two, {
        kind: 'failed',
        statusCode: null,
        error: 'connection refused',
      })
      expect(await store.claimDeliveries('inst-a', 10, now + 4_999, now + 40_000)).toEqual([])
      const listed = Object.fromEntries(
        (await deliveries('acct_1', 'whe_a')).map((d) => [d.batchId, d]),
      )
      expect(listed.batch_01).toMatchObject({
        status: 'pending',
        attempts: 1,
        lastStatusCode: 500,
        lastError: 'HTTP 500',
        nextAttemptAtMs: now + 5_000,
        lastAttemptAt: T0 + 3,
      })
      expect(listed.batch_02).toMatchObject({
        status: 'failed',
        attempts: 1,
        lastError: 'connection refused',
        nextAttemptAtMs: null,
      })
      const [retried] = await store.claimDeliveries('inst-a', 10, now + 5_000, now + 35_000)
      expect(retried).toMatchObject({ eventId: one.eventId, attempts: 2 })
      // A graceful stop hands it back, due at once, and the attempt it did not make is not counted.
      expect(await store.releaseDeliveries('inst-a', now + 6_000)).toBe(1)
      const [taken] = await store.claimDeliveries('inst-b', 10, now + 6_000, now + 36_000)
      expect(taken).toMatchObject({ eventId: one.eventId, attempts: 2 })
    })

    test('a deleted webhook’s deliveries go with it and are never claimed', async () => {
      await account('acct_1')
      await store.createWebhook(webhook('whe_a', 'acct_1'), 10)
      await store.createWebhook(webhook('whe_b', 'acct_1'), 10)
      await finish('acct_1', 'batch_01', 'succeeded')
      expect(await store.deleteWebhook('acct_1', 'whe_a')).toBe(true)
      const now = (T0 + 3) * 1000
      const claimed = await store.claimDeliveries('inst-a', 10, now, now + 30_000)
      expect(claimed.map((d) => d.webhookId)).toEqual(['whe_b'])
    })

    test('retention deletes the deliveries of the batches whose results it purges', async () => {
      await account('acct_1')
      await store.createWebhook(webhook('whe_a', 'acct_1'), 10)
      await finish('acct_1', 'batch_01', 'succeeded')
      // Finished later than the cutoff: kept.
      const admitted = await store.admitBatch(newBatch('acct_1', 'batch_02', 1))
      expect(admitted.kind).toBe('created')
      await store.cancelBatch('acct_1', 'batch_02', T0 + 100)
      expect(await store.purgeResults(T0 + 50, 10, T0 + 200)).toEqual(['batch_01'])
      expect((await deliveries('acct_1', 'whe_a')).map((d) => d.batchId)).toEqual(['batch_02'])
    })

    test('the delivery log pages newest first with limit and after', async () => {
      await account('acct_1')
      await store.createWebhook(webhook('whe_a', 'acct_1'), 10)
      for (const id of ['batch_01', 'batch_02', 'batch_03']) await finish('acct_1', id, 'succeeded')
      const first = await store.listDeliveries('acct_1', 'whe_a', { limit: 2, after: null })
      expect(first!.deliveries.map((d) => d.batchId)).toEqual(['batch_03', 'batch_02'])
      expect(first!.hasMore).toBe(true)
      const next = await store.listDeliveries('acct_1', 'whe_a', {
        limit: 2,
        after: first!.deliveries[1]!.eventId,
      })
      expect(next!.deliveries.map((d) => d.batchId)).toEqual(['batch_01'])
      expect(next!.hasMore).toBe(false)
    })
  })
}
