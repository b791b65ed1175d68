/**
 * Fair webhook shares in the store (docs/webhooks-and-streams.md), run by test/store/webhooks.test.ts on every
 * store beside webhook-contract.ts: claims go round-robin across webhooks,
 * at most 2 live leases per webhook whoever claims, and a webhook whose every attempt failed for
 * the window is disabled — no new deliveries, none claimed — until it is enabled again.
 */
import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import type { OpenedStore, Store, WebhookRecord } from '../../src/store/store.ts'
import { newBatch } from './batch-fixtures.ts'

const T0 = 1_764_460_000
const NOW = (T0 + 10) * 1000
const LEASE = 30_000
const HOUR = 3_600_000

export function runWebhookFairnessContract(name: string, makeStore: () => Promise<OpenedStore>) {
  let store: Store

  const webhook = (id: string, accountId: string): WebhookRecord => ({
    id,
    accountId,
    url: `https://hooks.example.com/${id}`,
    events: ['batch.cancelled'],
    secret: `whsec_${Buffer.from(id).toString('base64')}`,
    createdAt: T0,
    disabledAt: null,
  })

  async function account(id: string, hooks: string[]) {
    await store.createAccount({
      id,
      name: id,
      creditUsd: '100',
      maxOpenBatches: 100,
      rateLimitPerMinute: 600,
      createdAt: T0,
    })
    for (const hook of hooks) expect(await store.createWebhook(webhook(hook, id), 20)).toBe(true)
  }

  /** `count` batches cancelled with nothing run: one delivery each for every webhook of the account. */
  async function events(accountId: string, count: number, prefix = 'b') {
    for (let i = 0; i < count; i++) {
      const id = `batch_${accountId}_${prefix}${i}`
      expect((await store.admitBatch(newBatch(accountId, id, 1))).kind).toBe('created')
      expect((await store.cancelBatch(accountId, id, T0 + 1)).kind).toBe('cancelled')
    }
  }

  const fail = (at: number) => ({
    kind: 'retry' as const,
    atMs: at + 1_000,
    statusCode: 500,
    error: 'HTTP 500',
  })

  describe.serial(`webhook fairness contract: ${name}`, () => {
    beforeEach(async () => {
      store = (await makeStore()).store
    })
    afterEach(async () => {
      await store.close()
    })

    test('round-robin: every webhook’s first due delivery before any second, at most 2 in flight per webhook', async () => {
      await account('acct_a', ['whe_a1', 'whe_a2'])
      await account('acct_b', ['whe_b1'])
      await events('acct_a', 5)
      await events('acct_b', 1)
      const first = await store.claimDeliveries('inst-1', 4, NOW, NOW + LEASE)
      expect(first.map((d) => d.webhookId)).toEqual(['whe_a1', 'whe_a2', 'whe_b1', 'whe_a1'])
      // whe_a1 holds 2 live leases: another instance gets whe_a2's second, nothing of whe_a1's.
      const second = await store.claimDeliveries('inst-2', 10, NOW + 1, NOW + LEASE)
      expect(second.map((d) => d.webhookId)).toEqual(['whe_a2'])
      expect(await store.claimDeliveries('inst-3', 10, NOW + 2, NOW + LEASE)).toEqual([])
      // One attempt ends: that webhook may take one more, and only one.
      const done = first[0]!
      expect(
        await store.finishDelivery({ owner: 'inst-1', nowMs: NOW + 3 }, done, {
          kind: 'delivered',
          statusCode: 200,
        }),
      ).toBe(true)
      const third = await store.claimDeliveries('inst-3', 10, NOW + 4, NOW + LEASE)
      expect(third.map((d) => d.webhookId)).toEqual(['whe_a1'])
      // Leases that ran out no longer count: each webhook takes two again.
      const later = await store.claimDeliveries('inst-4', 10, NOW + LEASE + 10, NOW + 2 * LEASE)
      expect(later.map((d) => d.webhookId).sort()).toEqual([
        'whe_a1',
        'whe_a1',
        'whe_a2',
        'whe_a2',
        'whe_b1',
      ])
    })

    test('the webhook claimed longest ago goes first; a small claim does not starve anyone', async () => {
      await account('acct_a', ['whe_a1', 'whe_a2', 'whe_a3'])
      await events('acct_a', 6)
      const seen: string[] = []
      for (let round = 0; round < 3; round++) {
        const [claimed] = await store.claimDeliveries('inst-1', 1, NOW + round, NOW + round + 10)
        seen.push(claimed!.webhookId)
      }
      expect(seen).toEqual(['whe_a1', 'whe_a2', 'whe_a3'])
    })

    test('claims at once from many connections never pass 2 live leases per webhook', async () => {
      await account('acct_a', ['whe_a1', 'whe_a2', 'whe_a3'])
      await events('acct_a', 8)
      const claims = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          store.claimDeliveries(`inst-${i}`, 3, NOW, NOW + LEASE),
        ),
      )
      const perWebhook: Record<string, number> = {}
      const count = (list: { webhookId: string }[]) => {
        for (const d of list) perWebhook[d.webhookId] = (perWebhook[d.webhookId] ?? 0) + 1
      }
      count(claims.flat())
      // Claims that met each other's locks took less; the cap is never passed.
      for (const n of Object.values(perWebhook)) expect(n).toBeLessThanOrEqual(2)
      count(await store.claimDeliveries('inst-last', 100, NOW + 1, NOW + LEASE))
      expect(perWebhook).toEqual({ whe_a1: 2, whe_a2: 2, whe_a3: 2 })
    })

    test('every attempt failed for the window: disabled, no new deliveries, none claimed, until enabled', async () => {
      await account('acct_a', ['whe_a1', 'whe_a2'])
      await events('acct_a', 2)
      const window = 24 * HOUR
      const [one] = await store.claimDeliveries('inst-1', 1, NOW, NOW + LEASE)
      expect(one!.webhookId).toBe('whe_a1')
      await store.finishDelivery(
        { owner: 'inst-1', nowMs: NOW, disableAfterMs: window },
        one!,
        fail(NOW),
      )
      // A success in between forgets the failures: whe_a2's count starts again after it.
      const [a2] = await store.claimDeliveries('inst-1', 1, NOW, NOW + LEASE)
      expect(a2!.webhookId).toBe('whe_a2')
      await store.finishDelivery(
        { owner: 'inst-1', nowMs: NOW, disableAfterMs: window },
        a2!,
        fail(NOW),
      )
      // Almost the window later: still enabled.
      let at = NOW + window - 1
      const retried = await store.claimDeliveries('inst-1', 10, at, at + LEASE)
      expect(retried.map((d) => d.webhookId).sort()).toEqual([
        'whe_a1',
        'whe_a1',
        'whe_a2',
        'whe_a2',
      ])
      for (const d of retried) {
        const result =
          d.webhookId === 'whe_a2' ? { kind: 'delivered' as const, statusCode: 200 } : fail(at)
        await store.finishDelivery(
          { owner: 'inst-1', nowMs: at, disableAfterMs: window },
          d,
          result,
        )
      }
      expect((await store.listWebhooks('acct_a')).every((w) => w.disabledAt === null)).toBe(true)
      // The window reached, every attempt of whe_a1 failed: disabled at that time.
      at = NOW + window + 5_000
      const [again] = await store.claimDeliveries('inst-1', 1, at, at + LEASE)
      expect(again!.webhookId).toBe('whe_a1')
      expect(
        await store.finishDelivery(
          { owner: 'inst-1', nowMs: at, disableAfterMs: window },
          again!,
          fail(at),
        ),
      ).toBe(true)
      const hooks = Object.fromEntries((await store.listWebhooks('acct_a')).map((w) => [w.id, w]))
      expect(hooks.whe_a1!.disabledAt).toBe(Math.floor(at / 1000))
      expect(hooks.whe_a2!.disabledAt).toBeNull()
      // Its pending delivery is not claimed, and a new event gives it none.
      expect(await store.claimDeliveries('inst-1', 10, at + 10 * HOUR, at + 11 * HOUR)).toEqual([])
      await events('acct_a', 1, 'late')
      const log = await store.listDeliveries('acct_a', 'whe_a1', { limit: 100, after: null })
      expect(log!.deliveries).toHaveLength(2)
      expect(
        (await store.listDeliveries('acct_a', 'whe_a2', { limit: 100, after: null }))!.deliveries,
      ).toHaveLength(3)
      // Enabled again: another account cannot, the owner can; its deliveries are claimed again.
      await account('acct_b', [])
      expect(await store.enableWebhook('acct_b', 'whe_a1')).toBeNull()
      expect(await store.enableWebhook('acct_a', 'whe_a1')).toEqual(webhook('whe_a1', 'acct_a'))
      const resumed = await store.claimDeliveries('inst-1', 10, at + 1_000_000, at + 1_100_000)
      expect(resumed.map((d) => d.webhookId)).toContain('whe_a1')
      // Its failures were forgotten: one more failure does not disable it again.
      const mine = resumed.find((d) => d.webhookId === 'whe_a1')!
      await store.finishDelivery(
        { owner: 'inst-1', nowMs: at + 1_000_000, disableAfterMs: window },
        mine,
        fail(at + 1_000_000),
      )
      expect((await store.listWebhooks('acct_a')).find((w) => w.id === 'whe_a1')!.disabledAt).toBe(
        null,
      )
    })
  })
}
