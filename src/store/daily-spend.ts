/**
 * The rules both stores apply for the daily spend limit and the wait for credit (SPEC §12, §14),
 * so the two cannot disagree.
 */
import { Money, usd, ZERO } from '../money/decimal.ts'

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
  if (isWaitingForCredit(row)) return new Money(String(row.cost_ceiling_usd))
  return new Money(String(row.cost_usd)).plus(String(row.held_usd))
}

export const isWaitingForCredit = (row: Row) =>
  row.status === 'validating' &&
  row.credit_wait_until !== null &&
  row.credit_wait_until !== undefined

/** Live charges of the day of `nowMs`: the account's counter belongs to one day only. */
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
