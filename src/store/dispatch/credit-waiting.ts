/**
 * What a running batch says while its account's balance is below what the account's open batches
 * hold (a line that cost more than its ceiling, or credit an operator took away): none of the
 * account's lines is dispatched until a deposit covers the holds again (docs/money-and-limits.md,
 * §13 `insufficient_credit`). The same words from both stores, which set it in their maintenance
 * pass and clear it there once the holds are covered.
 */
import { WAITING_CODES, type BatchWaiting } from '../../domain.ts'
import { Money, usd } from '../../money/decimal.ts'

/** Whether an account's balance is below what it holds: its batches' lines are not dispatched. */
export const shortOfHolds = (balanceUsd: string, heldUsd: string) =>
  new Money(balanceUsd).lessThan(heldUsd)

/** Why a running batch of an account short of its holds waits, with the deposit that resumes it. */
export function creditShortWaiting(balanceUsd: string, heldUsd: string): BatchWaiting {
  const shortfall = new Money(heldUsd).minus(balanceUsd)
  return {
    code: 'insufficient_credit',
    message:
      `This account's balance ($${usd(balanceUsd)}) is below what its open batches hold ` +
      `($${usd(heldUsd)}), so none of their lines is dispatched: dispatch resumes once a deposit ` +
      `of at least $${usd(shortfall)} makes it cover them. Nothing to resubmit; lines still ` +
      'pending at the deadline end expired, unbilled.',
  }
}

/** The reasons insufficient_credit is said over: any but a cap's, whose lines end cancelled anyway. */
export const CREDIT_REPLACES = WAITING_CODES.filter((code) => code !== 'max_cost_reached')

/** A running batch as the maintenance pass reads it: its pending lines and its account's money. */
export interface CreditWaitRow {
  pending: number
  balance_usd: string
  held_usd: string
  waiting_code: string | null
  waiting_message: string | null
}

/**
 * What a running batch's `waiting` becomes (undefined: it stays as it is). Short of its holds with
 * lines pending, it says insufficient_credit over any other reason but a cap's (whose lines end
 * cancelled whatever the credit); covered again, or with nothing left pending, it is cleared.
 */
export function creditWaitChange(row: CreditWaitRow): BatchWaiting | null | undefined {
  if (Number(row.pending) > 0 && shortOfHolds(row.balance_usd, row.held_usd)) {
    if (row.waiting_code === 'max_cost_reached') return undefined
    const waiting = creditShortWaiting(row.balance_usd, row.held_usd)
    const same = row.waiting_code === waiting.code && row.waiting_message === waiting.message
    return same ? undefined : waiting
  }
  return row.waiting_code === 'insufficient_credit' ? null : undefined
}
