/**
 * The rules both stores apply for the daily spend limit and the wait for credit (docs/money-and-limits.md, docs/open-models.md),
 * so the two cannot disagree.
 */
import { batchHold as holdOf, Money, moneyText, usd, ZERO } from '../../money/decimal.ts'
import type { DailySpend } from './credit-store.ts'

/** A row of either store, with the column names of sql/. */
type Row = Record<string, any>

const DAY_MS = 86_400_000

/** The UTC day of a time in Unix ms, as a day number: days reset at 00:00 UTC. */
export const utcDay = (ms: number) => Math.floor(ms / DAY_MS)

/** 00:00 UTC of the day of `ms`, in Unix seconds (batches' created_at). */
export const dayStartSeconds = (ms: number) => utcDay(ms) * 86_400

/**
 * What one of the day's batches counts against the limit: while it waits for credit, the hold it
 * will take; otherwise what it holds plus what it was charged (its ceiling while it runs, its
 * cost once it ends).
 */
export function batchDailyUse(row: Row): Money {
  if (isWaitingForCredit(row)) return rowHold(row)
  return new Money(String(row.cost_usd)).plus(String(row.held_usd))
}

/** What a stored batch holds once it runs: money/decimal.ts's batchHold of its row's columns. */
export const rowHold = (row: Row): Money =>
  new Money(
    holdOf(
      String(row.cost_ceiling_usd),
      row.max_cost_usd === null || row.max_cost_usd === undefined ? null : String(row.max_cost_usd),
    ),
  )

/** Admitted with wait_for_credit=true and still waiting: it holds nothing yet (docs/open-models.md). */
export const isWaitingForCredit = (row: Row) =>
  row.status === 'validating' && row.waiting_code === 'insufficient_credit'

const utc = (seconds: number) =>
  new Date(seconds * 1000).toISOString().replace('T', ' ').replace('.000Z', ' UTC')

/**
 * `waiting.message` of a batch waiting for credit: what it holds, the deposit that starts it now
 * (depositNeeded), and when it fails if that does not come.
 */
export function creditWaitMessage(holdUsd: string | Money, neededUsd: Money, until: number) {
  const what = neededUsd.greaterThan(0)
    ? `the account's available credit does not cover it; deposit at least $${usd(neededUsd)} to start it`
    : 'the credit covers it now: it starts within seconds'
  return `waiting for credit: the batch holds up to $${usd(holdUsd)} before it runs and ${what}. Unless it starts by ${utc(until)}, it fails with insufficient_quota and nothing is run or charged`
}

/**
 * What a batch being deleted still counts against the day of `nowMs`: its daily use when it was
 * admitted that day, else nothing. The limit sums the day's batch rows, so a deleted row's use
 * goes into the account's day counter (liveSpentOn) instead; without it, deleting ended batches
 * would give their spend back to the limit.
 */
export const deletedBatchDailyUse = (batch: Row, nowMs: number): Money =>
  Number(batch.created_at) >= dayStartSeconds(nowMs) ? batchDailyUse(batch) : ZERO

/**
 * The day's spend outside the day's batch rows: live charges and batches deleted that day. The
 * account's counter (`live_spend_day`, `live_spent_usd`) belongs to one day only.
 */
export const liveSpentOn = (row: Row, nowMs: number) =>
  Number(row.live_spend_day) === utcDay(nowMs) ? new Money(String(row.live_spent_usd)) : ZERO

/** What is left under the limit; null limit: no bound. */
export const dailyRoom = (limit: unknown, used: Money): Money | null =>
  limit === null || limit === undefined
    ? null
    : Money.max(ZERO, new Money(String(limit)).minus(used))

/** The error a batch that waited for credit in vain ends with (batch errors and its lines). */
export function creditWaitFailure(holdUsd: string, until: number) {
  return `the account's available credit did not cover the batch's hold of $${usd(holdUsd)} by ${new Date(until * 1000).toISOString().replace('.000Z', 'Z')} (half its completion window); nothing was run or charged. Add credit and submit it again`
}

/**
 * The waiting columns of a batch admitted to wait for credit, against what is available now and
 * the holds of the account's batches already waiting (`ahead`, oldest first): the deposit its
 * message asks for is what starts it (depositNeeded).
 */
export function creditWaitColumns(
  hold: string,
  ahead: readonly Money[],
  available: Money,
  until: number,
) {
  return {
    code: 'insufficient_credit' as const,
    message: creditWaitMessage(hold, depositNeeded(ahead, new Money(hold), available), until),
    until,
  }
}

/**
 * The least deposit that starts a batch holding `hold`, behind the holds of batches waiting
 * before it (`earlier`, oldest first), with `available` now: a pass starts each in turn whose
 * hold the credit left covers (planCreditWaits), so a deposit first goes to the earlier ones
 * it covers. Raised by each shortfall until the pass reaches this one (the least that does, as
 * test/money/deposit-needed.test.ts checks against the pass itself); covering every earlier hold
 * too always does, which bounds it.
 */
export function depositNeeded(earlier: readonly Money[], hold: Money, available: Money): Money {
  const all = Money.max(ZERO, earlier.reduce((sum, h) => sum.plus(h), hold).minus(available))
  let deposit = Money.max(ZERO, hold.minus(available))
  while (deposit.lessThan(all)) {
    let left = available.plus(deposit)
    for (const h of earlier) if (h.lessThanOrEqualTo(left)) left = left.minus(h)
    if (hold.lessThanOrEqualTo(left)) return deposit
    deposit = deposit.plus(hold.minus(left))
  }
  return all
}

/** getDailySpend's answer: an account row as read and what counts against its limit today. */
export const dailySpendOf = (account: Row, used: Money): DailySpend => ({
  limitUsd:
    account.daily_spend_limit_usd === null ? null : moneyText(account.daily_spend_limit_usd),
  usedUsd: moneyText(used),
})

/** What a pass over one account's batches waiting for credit does (planCreditWaits). */
export interface CreditWaitPlan {
  /** Batches that start now, each holding `hold`. */
  start: { id: string; hold: Money }[]
  /** Batches that go on waiting whose `waiting.message` changes. */
  messages: { id: string; message: string }[]
  /** The sum of the holds of those that start: the account holds this much more. */
  taken: Money
}

/**
 * Starts an account's waiting batches, earliest first, each whose hold the credit left covers
 * (docs/open-models.md: a batch starts as soon as a deposit makes its hold fit, also past an
 * earlier one it does not cover); the others stay waiting, each told the deposit that starts it
 * (depositNeeded). `waiting`: the rows (id, cost_ceiling_usd, max_cost_usd, waiting_until,
 * waiting_message) whose wait is not over, ordered by created_at, then id.
 */
export function planCreditWaits(waiting: readonly Row[], available: Money): CreditWaitPlan {
  const plan: CreditWaitPlan = { start: [], messages: [], taken: ZERO }
  const left: { batch: Row; hold: Money }[] = []
  for (const batch of waiting) {
    const hold = rowHold(batch)
    if (hold.lessThanOrEqualTo(available)) {
      available = available.minus(hold)
      plan.taken = plan.taken.plus(hold)
      plan.start.push({ id: batch.id, hold })
    } else left.push({ batch, hold })
  }
  left.forEach(({ batch, hold }, index) => {
    const earlier = left.slice(0, index).map((one) => one.hold)
    const needed = depositNeeded(earlier, hold, available)
    const message = creditWaitMessage(hold, needed, Number(batch.waiting_until))
    if (batch.waiting_message !== message) plan.messages.push({ id: batch.id, message })
  })
  return plan
}
