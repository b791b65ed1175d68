/**
 * The account store's contract (src/store/accounts/), on every store (every-store.ts): accounts
 * and their balance, API keys found by hash, dashboard sessions.
 */
import { afterEach, beforeEach, describe, expect } from 'bun:test'
import type { NewAccount, Store } from '../../src/store/store.ts'
import { newAccount, onEveryStore, T0 } from './every-store.ts'

onEveryStore(({ name, makeStore, it }) => {
  describe.serial(`account store contract: ${name}`, () => {
    let store: Store
    beforeEach(async () => {
      store = (await makeStore()).store
    })
    afterEach(async () => {
      await store.close()
    })
    const account = (id: string, creditUsd = '100', extra: Partial<NewAccount> = {}) =>
      store.createAccount(newAccount(id, creditUsd, extra))

    describe('accounts and credit', () => {
      it('creates an account with its credit, nothing held and no open batch', async () => {
        const created = await account('acct_1', '100.50')
        expect(created).toEqual({
          id: 'acct_1',
          name: 'acct_1',
          balanceUsd: '100.5',
          heldUsd: '0',
          maxOpenBatches: 10,
          rateLimitPerMinute: 600,
          createdAt: T0,
          openBatches: 0,
        })
        expect(await store.getAccount('acct_1')).toEqual(created)
        expect(await store.getAccount('acct_missing')).toBeNull()
      })

      it('adds credit exactly and removes it, never below zero', async () => {
        await account('acct_1', '0.1')
        expect((await store.addCredit('acct_1', '0.2'))!.balanceUsd).toBe('0.3')
        expect((await store.addCredit('acct_1', '0.000000001'))!.balanceUsd).toBe('0.300000001')
        expect((await store.addCredit('acct_1', '-0.3'))!.balanceUsd).toBe('0.000000001')
        expect((await store.addCredit('acct_1', '-1000'))!.balanceUsd).toBe('0')
        expect((await store.getAccount('acct_1'))!.balanceUsd).toBe('0')
        expect(await store.addCredit('acct_missing', '5')).toBeNull()
      })
    })

    describe('keys', () => {
      it('creates a key, finds it by hash with its account, and not once revoked', async () => {
        await account('acct_1', '7')
        const key = await store.createKey({
          id: 'key_1',
          accountId: 'acct_1',
          hash: 'hash_1',
          prefix: 'mg_ab12',
          name: 'ci',
          scopes: ['batches', 'read'],
          rateLimitPerMinute: 60,
          createdAt: T0,
        })
        expect(key).toEqual({
          id: 'key_1',
          accountId: 'acct_1',
          name: 'ci',
          scopes: ['batches', 'read'],
          rateLimitPerMinute: 60,
          createdAt: T0,
          revokedAt: null,
          prefix: 'mg_ab12',
        })
        const found = await store.findKey('hash_1')
        expect(found!.key).toEqual(key!)
        expect(found!.account).toMatchObject({ id: 'acct_1', balanceUsd: '7', heldUsd: '0' })
        expect(await store.findKey('hash_unknown')).toBeNull()

        const revoked = await store.revokeKey('key_1', T0 + 5)
        expect(revoked!.revokedAt).toBe(T0 + 5)
        expect((await store.revokeKey('key_1', T0 + 9))!.revokedAt).toBe(T0 + 5)
        expect(await store.findKey('hash_1')).toBeNull()
        expect(await store.revokeKey('key_missing', T0)).toBeNull()
      })

      it('refuses a key for a missing account and keeps a null rate limit', async () => {
        const base = { hash: 'h', prefix: 'mg_x', name: null, scopes: ['inference' as const] }
        expect(
          await store.createKey({
            ...base,
            id: 'key_1',
            accountId: 'acct_missing',
            rateLimitPerMinute: null,
            createdAt: T0,
          }),
        ).toBeNull()
        await account('acct_1')
        const key = await store.createKey({
          ...base,
          id: 'key_2',
          accountId: 'acct_1',
          rateLimitPerMinute: null,
          createdAt: T0,
        })
        expect(key).toMatchObject({ name: null, scopes: ['inference'], rateLimitPerMinute: null })
      })
    })

    describe('dashboard sessions', () => {
      const key = (id: string) =>
        store.createKey({
          id,
          accountId: 'acct_1',
          hash: `hash_${id}`,
          prefix: 'mg_ab12',
          name: null,
          scopes: ['read'],
          rateLimitPerMinute: null,
          createdAt: T0,
        })

      it('finds a live session with its key and account; not once deleted, expired or its key revoked', async () => {
        await account('acct_1', '7')
        await key('key_1')
        await key('key_2')
        await store.createSession({
          hash: 's1',
          keyId: 'key_1',
          createdAt: T0,
          expiresAt: T0 + 100,
        })
        await store.createSession({
          hash: 's2',
          keyId: 'key_1',
          createdAt: T0,
          expiresAt: T0 + 200,
        })
        await store.createSession({
          hash: 's3',
          keyId: 'key_2',
          createdAt: T0,
          expiresAt: T0 + 100,
        })
        const found = await store.findSession('s1', T0 + 1)
        expect(found!.key).toMatchObject({ id: 'key_1', scopes: ['read'] })
        expect(found!.account).toMatchObject({ id: 'acct_1', balanceUsd: '7' })
        expect(await store.findSession('s1', T0 + 100)).toBeNull()
        expect(await store.findSession('unknown', T0)).toBeNull()
        await store.deleteSession('s1')
        expect(await store.findSession('s1', T0 + 1)).toBeNull()
        expect(await store.findSession('s2', T0 + 1)).not.toBeNull()
        await store.revokeKey('key_1', T0 + 2)
        expect(await store.findSession('s2', T0 + 3)).toBeNull()
        expect(await store.deleteExpiredSessions(T0 + 100)).toBe(1)
        expect(await store.deleteExpiredSessions(T0 + 100)).toBe(0)
      })
    })
  })
})
