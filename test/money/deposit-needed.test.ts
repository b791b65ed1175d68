/**
 * The deposit a batch waiting for credit asks for (docs/open-models.md): the least that makes the
 * pass over the account's waiting batches, earliest first, each started when the credit left
 * covers it, reach this one. Checked against that pass itself.
 */
import { describe, expect, test } from 'bun:test'
import { Money } from '../../src/money/decimal.ts'
import { depositNeeded, planCreditWaits } from '../../src/store/credit/daily-spend.ts'

const m = (text: string) => new Money(text)
const rows = (holds: string[]) =>
  holds.map((hold, i) => ({
    id: `b${i}`,
    cost_ceiling_usd: hold,
    max_cost_usd: null,
    waiting_until: 2_000_000_000,
    waiting_message: null,
  }))
/** Which batches a pass starts with `available`. */
const started = (holds: string[], available: string) =>
  planCreditWaits(rows(holds), m(available)).start.map((one) => one.id)

describe('depositNeeded', () => {
  test('an earlier, larger hold it does not cover is passed over', () => {
    expect(depositNeeded([m('10')], m('3'), m('0')).toString()).toBe('3')
    expect(started(['10', '3'], '3')).toEqual(['b1'])
  })

  test('an earlier hold it covers is reached first, and counted', () => {
    expect(depositNeeded([m('3')], m('10'), m('0')).toString()).toBe('13')
    expect(started(['3', '10'], '12.99')).toEqual(['b0'])
    expect(started(['3', '10'], '13')).toEqual(['b0', 'b1'])
  })

  test('what is available counts; nothing when it covers the hold already', () => {
    expect(depositNeeded([], m('5'), m('2')).toString()).toBe('3')
    expect(depositNeeded([m('4'), m('1')], m('2'), m('9')).toString()).toBe('0')
  })

  test('the least deposit, over many mixes of holds, against the pass itself', () => {
    let seed = 7
    const next = () => (seed = (seed * 48271) % 2147483647) / 2147483647
    for (let round = 0; round < 2000; round++) {
      const holds = Array.from({ length: 1 + Math.floor(next() * 7) }, () =>
        String(1 + Math.floor(next() * 20)),
      )
      const available = String(Math.floor(next() * 10))
      const last = holds.length - 1
      const needed = depositNeeded(holds.slice(0, last).map(m), m(holds[last]!), m(available))
      const reach = (deposit: number) =>
        started(holds, m(available).plus(deposit).toString()).includes(`b${last}`)
      expect(reach(needed.toNumber())).toBe(true)
      // Whole-dollar holds: no smaller whole deposit starts it.
      for (let less = 0; less < needed.toNumber(); less++) expect(reach(less)).toBe(false)
    }
  })

  test('past several earlier holds it skips and one it covers', () => {
    // 6 available: the 5 and 2 start first out of any deposit that covers them; 14 is the least.
    expect(depositNeeded(['10', '15', '5', '2'].map(m), m('3'), m('6')).toString()).toBe('14')
  })
})
