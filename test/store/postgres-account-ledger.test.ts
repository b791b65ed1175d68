/**
 * Settlements of one account off its row on PostgreSQL (sql/0018_account_ledger.sql), when
 * TEST_DATABASE_URL names one (skipped otherwise): while another owner's settlement of the same
 * account is open (its transaction not committed) and another connection holds the account row
 * as admission and live leases do (FOR NO KEY UPDATE), a settlement within the hold completes;
 * one past a line's ceiling, which takes its excess from the balance, waits for the open
 * settlement; and the money is exact after all of them.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { randomBytes } from 'node:crypto'
import postgres from 'postgres'
import { recordOutcomes } from '../../src/store/dispatch/postgres-record-outcomes.ts'
import { createPostgresStore } from '../../src/store/postgres/postgres-store.ts'
import type { LineOutcome } from '../../src/store/store.ts'
import { storeHelpers, succeeded } from './batch-fixtures.ts'
import { MS } from './every-store.ts'

const url = process.env.TEST_DATABASE_URL

/** Whether `promise` settles within `ms`. */
const within = (promise: Promise<unknown>, ms: number) =>
  Promise.race([promise.then(() => true), Bun.sleep(ms).then(() => false)])

if (!url) {
  describe('account ledger: postgres', () => {
    test.skip('needs TEST_DATABASE_URL, e.g. postgres://postgres@127.0.0.1:5432/test', () => {})
  })
} else {
  const schema = `t_${randomBytes(6).toString('hex')}`
  let opened: Awaited<ReturnType<typeof createPostgresStore>>
  let other: postgres.Sql
  const { account, admit, claim, allLines } = storeHelpers(() => opened)

  beforeAll(async () => {
    opened = await createPostgresStore(url, { schema, max: 4 })
    other = postgres(url, { max: 1, onnotice: () => {}, connection: { search_path: schema } })
  })
  afterAll(async () => {
    await opened.store.close()
    await other`DROP SCHEMA ${other(schema)} CASCADE`
    await other.end()
  })

  describe('account ledger: postgres', () => {
    test('settlements within their hold do not wait for each other; one past its ceiling does', async () => {
      await account('acct_1', '10')
      await admit('acct_1', 'batch_01', 4, { costCeilingUsd: '1' })
      await claim('batch_01', 'owner-b', 2)
      await claim('batch_01', 'owner-a', 2)
      let commit = () => {}
      const gate = new Promise<void>((resolve) => (commit = resolve))
      let opening = () => {}
      const open = new Promise<void>((resolve) => (opening = resolve))
      // owner-b's settlement, left open with its locks; and the row held as admission holds it.
      const openSettlement = other.begin(async (tx) => {
        const n = await recordOutcomes(tx, {
          owner: 'owner-b',
          outcomes: [succeeded('batch_01', 1, '0.1')],
          nowMs: MS + 100,
        })
        await tx`SELECT id FROM accounts WHERE id = 'acct_1' FOR NO KEY UPDATE`
        opening()
        await gate
        return n
      })
      await open
      const inHold = opened.dispatch.recordOutcomes(
        'owner-a',
        [succeeded('batch_01', 3, '0.2')],
        MS + 110,
      )
      expect(await within(inHold, 3_000)).toBe(true)
      expect(await inHold).toMatchObject({ recorded: 1 })
      // Ceiling 0.25, billed 0.5: the excess comes from the balance, exactly, so it waits.
      const over = { ...succeeded('batch_01', 4, '0.5'), ceilingUsd: '0.25' } as LineOutcome
      const pastCeiling = opened.dispatch.recordOutcomes('owner-a', [over], MS + 120)
      expect(await within(pastCeiling, 700)).toBe(false)
      commit()
      expect(await openSettlement).toMatchObject({ recorded: 1 })
      expect(await pastCeiling).toMatchObject({ recorded: 1 })
      expect(
        await opened.dispatch.recordOutcomes(
          'owner-b',
          [succeeded('batch_01', 2, '0.05')],
          MS + 130,
        ),
      ).toMatchObject({ recorded: 1 })
      expect((await allLines('batch_01')).map((line) => line.costUsd)).toEqual([
        '0.1',
        '0.05',
        '0.2',
        '0.5',
      ])
      // 0.85 charged; 0.6 of the 1 held released (0.25 of the last line's 0.5 from the hold).
      expect(await opened.store.getAccount('acct_1')).toMatchObject({
        balanceUsd: '9.15',
        heldUsd: '0.4',
      })
      // The in-hold parts are in the owners' shards, not on the row.
      const shards = await other`
        SELECT owner, drawn_usd::text AS drawn FROM account_ledger ORDER BY owner`
      expect(shards.map((row) => [row.owner, row.drawn])).toEqual([
        ['owner-a', '0.45'],
        ['owner-b', '0.15'],
      ])
      const [row] = await other`SELECT balance_usd::text AS b, held_usd::text AS h FROM accounts`
      expect(row).toMatchObject({ b: '9.75', h: '1' })
      // Ended: the shards are folded into the row.
      await opened.dispatch.advanceBatches(Math.floor(MS / 1000) + 1)
      await opened.dispatch.advanceBatches(Math.floor(MS / 1000) + 2)
      expect(await other`SELECT 1 FROM account_ledger`).toHaveLength(0)
      const [ended] = await other`SELECT balance_usd::text AS b, held_usd::text AS h FROM accounts`
      expect(ended).toMatchObject({ b: '9.15', h: '0' })
    }, 30_000)
  })
}
