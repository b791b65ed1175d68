/**
 * The usage store's contract (src/store/usage/), on every store (every-store.ts): additions of
 * several instances summed per account, UTC day, model and provider, money exact; rows read by an
 * inclusive range of days, in order.
 */
import { afterEach, beforeEach, describe, expect } from 'bun:test'
import type { Store, UsageAddition } from '../../src/store/store.ts'
import { newAccount, onEveryStore } from './every-store.ts'

const addition = (extra: Partial<UsageAddition> = {}): UsageAddition => ({
  accountId: 'acct_1',
  day: '2026-12-01',
  model: 'gpt-sim',
  provider: 'openai',
  lines: 1,
  liveCalls: 0,
  inputTokens: 100,
  cachedInputTokens: 40,
  outputTokens: 10,
  costUsd: '0.1',
  firstOfferingCostUsd: '0.2',
  ...extra,
})

onEveryStore(({ name, makeStore, it }) => {
  describe.serial(`usage store contract: ${name}`, () => {
    let store: Store
    beforeEach(async () => {
      store = (await makeStore()).store
    })
    afterEach(async () => {
      await store.close()
    })

    it('sums additions per day, model and provider, money exact', async () => {
      await store.createAccount(newAccount('acct_1'))
      await store.addUsage([])
      // One addition a key per call, as an instance sends them (its recorder sums them first).
      await store.addUsage([addition()])
      await store.addUsage([addition({ costUsd: '0.000000001', liveCalls: 2 })])
      await store.addUsage([addition({ lines: 3, costUsd: '0.2', firstOfferingCostUsd: '0.1' })])
      expect(await store.usageRows('acct_1', '2026-12-01', '2026-12-01')).toEqual([
        {
          day: '2026-12-01',
          model: 'gpt-sim',
          provider: 'openai',
          lines: 5,
          liveCalls: 2,
          inputTokens: 300,
          cachedInputTokens: 120,
          outputTokens: 30,
          costUsd: '0.300000001',
          firstOfferingCostUsd: '0.5',
        },
      ])
    })

    it("reads one account's rows by an inclusive range of days, by day, model and provider", async () => {
      await store.createAccount(newAccount('acct_1'))
      await store.createAccount(newAccount('acct_2'))
      await store.addUsage([
        addition({ day: '2026-12-03' }),
        addition({ day: '2026-12-02', provider: 'sim-b' }),
        addition({ day: '2026-12-02', model: 'a-model' }),
        addition({ day: '2026-11-30' }),
        addition({ accountId: 'acct_2', day: '2026-12-02' }),
      ])
      const rows = await store.usageRows('acct_1', '2026-12-01', '2026-12-03')
      expect(rows.map((row) => [row.day, row.model, row.provider])).toEqual([
        ['2026-12-02', 'a-model', 'openai'],
        ['2026-12-02', 'gpt-sim', 'sim-b'],
        ['2026-12-03', 'gpt-sim', 'openai'],
      ])
      expect(await store.usageRows('acct_3', '2026-12-01', '2026-12-03')).toEqual([])
    })
  })
})
