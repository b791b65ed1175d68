/**
 * The credit store's contract (src/store/credit/), on every store (every-store.ts): live credit
 * leased as a hold on the balance, seen by admission, gone once expired; live charges written in
 * idempotent groups; concurrent leases never past the balance. The daily spend limit's refusals
 * at admission are the batch contract's (batches.test.ts).
 */
import { afterEach, beforeEach, describe, expect } from 'bun:test'
import { Money } from '../../src/money/decimal.ts'
import type { NewAccount, Store } from '../../src/store/store.ts'
import { newBatch } from './batch-fixtures.ts'
import { MS, newAccount, onEveryStore } from './every-store.ts'

onEveryStore(({ name, makeStore, it }) => {
  describe.serial(`credit store contract: ${name}`, () => {
    let store: Store
    beforeEach(async () => {
      store = (await makeStore()).store
    })
    afterEach(async () => {
      await store.close()
    })
    const account = (id: string, creditUsd = '100', extra: Partial<NewAccount> = {}) =>
      store.createAccount(newAccount(id, creditUsd, extra))
    /** A live credit lease of acct_1 for `instanceId`, for 10 s from `nowMs`. */
    const take = (instanceId: string, needUsd: string, wantUsd: string, nowMs = MS) =>
      store.takeLiveCredit({
        instanceId,
        accountId: 'acct_1',
        needUsd,
        wantUsd,
        nowMs,
        expiresAtMs: nowMs + 10_000,
      })

    describe('live credit', () => {
      it('leases live credit as a hold: granted within what is available, seen by admission, gone once expired', async () => {
        await account('acct_1', '1')
        // At most half of what is available beyond the need, so another instance can still serve.
        expect(await take('inst_a', '0.1', '5', Date.now())).toEqual({
          grantedUsd: '0.5',
          leaseUsd: '0.5',
          availableUsd: '0.5',
          lostUsd: '0',
        })
        expect(await store.getAccount('acct_1')).toMatchObject({ balanceUsd: '1', heldUsd: '0.5' })
        expect(await take('inst_b', '0.6', '0.6', Date.now())).toEqual({
          grantedUsd: '0',
          leaseUsd: '0',
          availableUsd: '0.5',
          lostUsd: '0',
        })
        expect(await take('inst_b', '0.4', '0.4', Date.now())).toMatchObject({
          grantedUsd: '0.4',
          availableUsd: '0.1',
        })
        const refused = await store.admitBatch(
          newBatch('acct_1', 'batch_1', 1, { costCeilingUsd: '0.2' }),
        )
        expect(refused).toEqual({ kind: 'insufficient_quota', availableUsd: '0.1' })
        // Expired leases count for nothing and are deleted by whoever looks next; the owner hears of it.
        const later = Date.now() + 60_000
        expect(await store.renewLiveCredit('inst_a', ['acct_1'], later, later + 10_000)).toEqual([])
        expect(await take('inst_a', '0.1', '0.1', later)).toEqual({
          grantedUsd: '0.1',
          leaseUsd: '0.1',
          availableUsd: '0.9',
          lostUsd: '0.5',
        })
        // inst_b's lease went too; what is held now is the new one.
        expect(await store.getAccount('acct_1')).toMatchObject({ balanceUsd: '1', heldUsd: '0.1' })
      })

      it('writes live charges in idempotent groups: debit and lease shrink together, never below zero', async () => {
        await account('acct_1', '1')
        await account('acct_2', '0.01')
        const now = Date.now()
        await store.takeLiveCredit({
          instanceId: 'inst_a',
          accountId: 'acct_1',
          needUsd: '0.4',
          wantUsd: '0.4',
          nowMs: now,
          expiresAtMs: now + 60_000,
        })
        const group = {
          id: 'lcg_1',
          instanceId: 'inst_a',
          nowMs: now,
          entries: [
            { accountId: 'acct_2', chargeUsd: '0.02', releaseUsd: '0' },
            { accountId: 'acct_1', chargeUsd: '0.000000123', releaseUsd: '0.1' },
          ],
        }
        expect(await store.writeLiveCharges(group)).toBe(true)
        expect(await store.writeLiveCharges(group)).toBe(false)
        expect(await store.getAccount('acct_1')).toMatchObject({
          balanceUsd: '0.999999877',
          heldUsd: '0.299999877',
        })
        expect(
          await store.renewLiveCredit('inst_a', ['acct_1', 'acct_2'], now, now + 60_000),
        ).toEqual([{ accountId: 'acct_1', leaseUsd: '0.299999877' }])
        expect((await store.getAccount('acct_2'))!.balanceUsd).toBe('0')
        // A lease shrunk to nothing is gone; renewing it finds nothing.
        await store.writeLiveCharges({
          ...group,
          id: 'lcg_2',
          entries: [{ accountId: 'acct_1', chargeUsd: '0', releaseUsd: '0.299999877' }],
        })
        expect(await store.renewLiveCredit('inst_a', ['acct_1'], now, now + 60_000)).toEqual([])
        expect((await store.getAccount('acct_1'))!.heldUsd).toBe('0')
      })

      it('takes concurrent leases of several instances one at a time: never more than the balance', async () => {
        await account('acct_1', '1')
        const now = Date.now()
        const grants = await Promise.all(
          Array.from({ length: 6 }, (_, i) =>
            store.takeLiveCredit({
              instanceId: `inst_${i}`,
              accountId: 'acct_1',
              needUsd: '0.3',
              wantUsd: '0.3',
              nowMs: now,
              expiresAtMs: now + 60_000,
            }),
          ),
        )
        const total = grants.reduce((sum, g) => sum.plus(g.grantedUsd), new Money(0))
        expect(total.toFixed()).toBe('0.9')
        expect(grants.filter((g) => g.grantedUsd === '0.3')).toHaveLength(3)
        await store.dropLiveCredit(`inst_${grants.findIndex((g) => g.grantedUsd === '0.3')}`)
        expect((await store.getAccount('acct_1'))!.heldUsd).toBe('0.6')
      })
    })
  })
})
