/** Why a batch admitted with wait_for_credit=true has not started (SPEC §13, §14). */
import type { BatchRecord, BatchWaiting } from '../domain.ts'
import { Money, usd } from '../money/decimal.ts'

const utc = (seconds: number) =>
  new Date(seconds * 1000).toISOString().replace('T', ' ').replace('.000Z', ' UTC')

/** `insufficient_credit` while the batch waits for a deposit; null otherwise. */
export function creditWaiting(batch: BatchRecord): BatchWaiting | null {
  if (batch.status !== 'validating' || !batch.creditWait) return null
  const { until, neededUsd } = batch.creditWait
  const needed = new Money(neededUsd)
  // Zero: the credit covers it now and it starts within seconds (or the account's earlier
  // waiting batches are being started first).
  const what = needed.greaterThan(0)
    ? `deposit at least $${usd(needed)} to start it`
    : 'the credit covers it now: it starts within seconds'
  return {
    code: 'insufficient_credit',
    message: `waiting for credit: the batch holds up to $${usd(batch.costCeilingUsd)} before it runs and the account's available credit does not cover it${
      needed.greaterThan(0) ? '' : ' yet'
    }; ${what}. Unless it does by ${utc(until)}, the batch fails with insufficient_quota and nothing is run or charged`,
    until,
  }
}
