/**
 * Credit amounts on the admin API are bounded (|amount| ≤ 10^12 USD, ≤ 6 decimals) and balances
 * stay exact: a 401-digit credit used to be stored rounded to 40 digits, and a −100 debit on it
 * then changed nothing.
 */
import { creditRemovalProblem } from '../../src/money/credit-amount.ts'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'

for (const storeKind of STORES) {
  describe(`credit amounts (${storeKind})`, () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await startTestGateway({ store: storeKind, env: { MULTIGRID_DISPATCH: '0' } })
    })
    afterAll(async () => {
      await gw.stop()
    })

    const refusal = async (response: Response) => {
      expect(response.status).toBe(400)
      return ((await response.json()) as { error: { message: string; param: string } }).error
    }

    test('a 401-digit credit is a 400 that states the bound, on create and on credits', async () => {
      const huge = '1' + '0'.repeat(400)
      const created = await refusal(
        await gw.admin('/accounts', { body: { name: 'rich', credit_usd: huge } }),
      )
      expect(created.param).toBe('credit_usd')
      expect(created.message).toContain('at most 1000000000000 (10^12) USD')
      expect(created.message).toContain('6 decimals')
      // The refusal quotes a short excerpt, not the 401 digits.
      expect(created.message.length).toBeLessThan(300)
      const { accountId } = await gw.newAccount('1')
      for (const amount of [
        huge,
        `-${huge}`,
        '1000000000000.000001',
        '0.0000001',
        '1e12',
        '1_000',
      ]) {
        const error = await refusal(
          await gw.admin(`/accounts/${accountId}/credits`, { body: { amount_usd: amount } }),
        )
        expect(error.param).toBe('amount_usd')
        expect(error.message).toContain('at most 1000000000000')
      }
      expect(await (await gw.admin(`/accounts/${accountId}`)).json()).toMatchObject({
        balance_usd: '1.000000',
      })
    })

    test('balances at the bound stay exact under credits and debits', async () => {
      const { accountId } = await gw.newAccount('1000000000000')
      const credit = async (amount: string) => {
        const response = await gw.admin(`/accounts/${accountId}/credits`, {
          body: { amount_usd: amount },
        })
        expect(response.status).toBe(200)
        return ((await response.json()) as { balance_usd: string }).balance_usd
      }
      expect(await credit('-100')).toBe('999999999900.000000')
      expect(await credit('999999999999.999999')).toBe('1999999999899.999999')
      expect(await credit('-0.000001')).toBe('1999999999899.999998')
      expect(await credit('-1000000000000')).toBe('999999999899.999998')
      // Never below zero: more than the balance is refused, saying how much there is.
      const over = await gw.admin(`/accounts/${accountId}/credits`, {
        body: { amount_usd: '-1000000000000' },
      })
      expect(over.status).toBe(400)
      expect(((await over.json()) as { error: { message: string } }).error.message).toContain(
        'it is 999999999899.999998 USD; remove at most 999999999899.999998',
      )
      expect(await credit('-999999999899.999998')).toBe('0.000000')
    })
  })
}

test('a removal past a balance of more than 6 decimals is told the most it can remove, rounded down', () => {
  expect(creditRemovalProblem('0.100000579', '-1')).toBe(
    'would take the balance below zero: it is 0.100000579 USD; remove at most 0.100000 ("-0.100000")',
  )
  expect(creditRemovalProblem('0.100000579', '-0.100000')).toBeNull()
  expect(creditRemovalProblem('0', '5')).toBeNull()
})
