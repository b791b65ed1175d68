/**
 * The fine-tune store's contract (src/store/fine-tunes/), on every store (every-store.ts):
 * registration once per id and only for a known account, listing, deactivation.
 */
import { afterEach, beforeEach, describe, expect } from 'bun:test'
import type { Store } from '../../src/store/store.ts'
import { newAccount, onEveryStore, T0 } from './every-store.ts'

onEveryStore(({ name, makeStore, it }) => {
  describe.serial(`fine-tune store contract: ${name}`, () => {
    let store: Store
    beforeEach(async () => {
      store = (await makeStore()).store
    })
    afterEach(async () => {
      await store.close()
    })
    const account = (id: string) => store.createAccount(newAccount(id))

    describe('fine-tunes', () => {
      const fineTune = (id: string, accountId = 'acct_1', createdAt = T0) => ({
        id,
        accountId,
        baseModel: 'qwen/qwen2.5-7b-instruct',
        name: id.split(':').at(-1)!,
        rank: 32,
        sizeMib: 160,
        source: `/adapters/${id}`,
        createdAt,
      })

      it('creates an active fine-tune, refuses its id again and an unknown account', async () => {
        await account('acct_1')
        const created = await store.createFineTune(fineTune('ft:q:tag:a'))
        expect(created).toEqual({
          kind: 'created',
          fineTune: { ...fineTune('ft:q:tag:a'), status: 'active', deactivatedAt: null },
        })
        const again = await store.createFineTune({ ...fineTune('ft:q:tag:a'), rank: 64 })
        expect(again.kind).toBe('duplicate')
        expect(again.kind === 'duplicate' && again.fineTune.rank).toBe(32)
        expect(await store.createFineTune(fineTune('ft:q:tag:b', 'acct_missing'))).toEqual({
          kind: 'no_account',
        })
        expect(await store.getFineTune('ft:q:tag:b')).toBeNull()
      })

      it("lists one account's fine-tunes oldest first, only the active ones when asked", async () => {
        await account('acct_1')
        await account('acct_2')
        await store.createFineTune(fineTune('ft:q:tag:late', 'acct_1', T0 + 5))
        await store.createFineTune(fineTune('ft:q:tag:early', 'acct_1', T0))
        await store.createFineTune(fineTune('ft:q:other:theirs', 'acct_2'))
        await store.deactivateFineTune('ft:q:tag:early', T0 + 9)
        const all = await store.listFineTunes('acct_1')
        expect(all.map((a) => [a.id, a.status])).toEqual([
          ['ft:q:tag:early', 'inactive'],
          ['ft:q:tag:late', 'active'],
        ])
        const active = await store.listFineTunes('acct_1', { activeOnly: true })
        expect(active.map((a) => a.id)).toEqual(['ft:q:tag:late'])
        expect(await store.listFineTunes('acct_none')).toEqual([])
      })

      it('deactivates once: the first time is kept, an unknown id is null', async () => {
        await account('acct_1')
        await store.createFineTune(fineTune('ft:q:tag:a'))
        const first = await store.deactivateFineTune('ft:q:tag:a', T0 + 10)
        expect(first).toMatchObject({ status: 'inactive', deactivatedAt: T0 + 10 })
        const second = await store.deactivateFineTune('ft:q:tag:a', T0 + 20)
        expect(second).toMatchObject({ status: 'inactive', deactivatedAt: T0 + 10 })
        expect(await store.getFineTune('ft:q:tag:a')).toMatchObject({ status: 'inactive' })
        expect(await store.deactivateFineTune('ft:q:tag:none', T0)).toBeNull()
      })
    })
  })
})
