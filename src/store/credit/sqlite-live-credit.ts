/**
 * Live credit leases and charge groups on the embedded store (LiveCreditStore in credit-store.ts; the
 * rules are sql/0004_live_credit.sql's). Each function runs inside the caller's IMMEDIATE
 * transaction, so a lease and a batch hold never both take the same credit.
 */
import { minMoney, Money, moneyText, ZERO } from '../../money/decimal.ts'
import { sqliteQuery as q, type Row, type SqliteConnection } from '../connection.ts'
import type { LeaseRenewal, LiveCreditStore } from './credit-store.ts'
import { liveSpentOn, utcDay } from './daily-spend.ts'
import { GROUP_MEMORY_MS, liveAvailable, liveGrant } from './live-grant.ts'
import { dailyUsed } from './sqlite-daily-spend.ts'
import { leasedUsd } from './sqlite-leases.ts'

type Database = SqliteConnection
type Store = LiveCreditStore

export function takeLiveCredit(db: Database, request: Parameters<Store['takeLiveCredit']>[0]) {
  const { instanceId, accountId, nowMs, expiresAtMs } = request
  const account = q(db, 'SELECT * FROM accounts WHERE id = ?').get(accountId)
  if (!account) return { grantedUsd: '0', leaseUsd: '0', availableUsd: '0', lostUsd: '0' }
  const lost = q(
    db,
    'SELECT amount_usd FROM credit_leases WHERE account_id = ? AND instance_id = ? AND expires_at_ms <= ?',
  ).get(accountId, instanceId, nowMs)
  q(db, 'DELETE FROM credit_leases WHERE account_id = ? AND expires_at_ms <= ?').run(
    accountId,
    nowMs,
  )
  const credit = new Money(account.balance_usd)
    .minus(account.held_usd)
    .minus(leasedUsd(db, accountId, nowMs))
  // A lease counts against the daily limit as a hold does, so no call can pass it.
  const used = account.daily_spend_limit_usd === null ? ZERO : dailyUsed(db, account, nowMs)
  const { available, dailyLimit } = liveAvailable(credit, account.daily_spend_limit_usd, used)
  const grant = liveGrant(available, new Money(request.needUsd), new Money(request.wantUsd))
  const mine = q(
    db,
    'SELECT amount_usd FROM credit_leases WHERE account_id = ? AND instance_id = ?',
  ).get(accountId, instanceId)
  const lease = grant.plus(mine ? mine.amount_usd : 0)
  if (mine) {
    q(
      db,
      'UPDATE credit_leases SET amount_usd = ?, expires_at_ms = ? WHERE account_id = ? AND instance_id = ?',
    ).run(moneyText(lease), expiresAtMs, accountId, instanceId)
  } else if (grant.greaterThan(0)) {
    q(
      db,
      'INSERT INTO credit_leases (account_id, instance_id, amount_usd, expires_at_ms) VALUES (?, ?, ?, ?)',
    ).run(accountId, instanceId, moneyText(grant), expiresAtMs)
  }
  return {
    grantedUsd: moneyText(grant),
    leaseUsd: moneyText(lease),
    availableUsd: moneyText(Money.max(ZERO, available.minus(grant))),
    lostUsd: lost ? moneyText(lost.amount_usd) : '0',
    dailyLimit,
  }
}

/** Renews this instance's live leases of these accounts, at `nowMs`, until `expiresAtMs`. */
export function renewLiveCredit(
  db: Database,
  instanceId: string,
  accountIds: readonly string[],
  { nowMs, expiresAtMs }: LeaseRenewal,
) {
  // An expired lease is not brought back: another instance may already have counted it as gone.
  const renew = q(
    db,
    'UPDATE credit_leases SET expires_at_ms = ? WHERE account_id = ? AND instance_id = ? AND expires_at_ms > ? RETURNING amount_usd',
  )
  const renewed: { accountId: string; leaseUsd: string }[] = []
  for (const id of accountIds) {
    const row = renew.get(expiresAtMs, id, instanceId, nowMs)
    if (row) renewed.push({ accountId: id, leaseUsd: moneyText(row.amount_usd) })
  }
  return renewed
}

export function writeLiveCharges(db: Database, group: Parameters<Store['writeLiveCharges']>[0]) {
  if (q(db, 'SELECT 1 FROM live_charge_groups WHERE id = ?').get(group.id)) return false
  let total = ZERO
  for (const entry of group.entries) {
    const account = q(
      db,
      'SELECT balance_usd, live_spend_day, live_spent_usd FROM accounts WHERE id = ?',
    ).get(entry.accountId)
    if (!account) continue
    // Never below zero: a lease is at most the balance, but a negative deposit may have come since.
    const balance = new Money(account.balance_usd)
    const charged = minMoney(new Money(entry.chargeUsd), balance)
    total = total.plus(charged)
    // The day's live charges, for the daily limit: a counter of the day it was written on.
    q(
      db,
      'UPDATE accounts SET balance_usd = ?, live_spend_day = ?, live_spent_usd = ? WHERE id = ?',
    ).run(
      moneyText(balance.minus(charged)),
      utcDay(group.nowMs),
      moneyText(liveSpentOn(account, group.nowMs).plus(charged)),
      entry.accountId,
    )
    const lease = q(
      db,
      'SELECT amount_usd FROM credit_leases WHERE account_id = ? AND instance_id = ?',
    ).get(entry.accountId, group.instanceId)
    if (!lease) continue
    const left = new Money(lease.amount_usd).minus(entry.chargeUsd).minus(entry.releaseUsd)
    if (left.greaterThan(0)) {
      q(db, 'UPDATE credit_leases SET amount_usd = ? WHERE account_id = ? AND instance_id = ?').run(
        moneyText(left),
        entry.accountId,
        group.instanceId,
      )
    } else
      q(db, 'DELETE FROM credit_leases WHERE account_id = ? AND instance_id = ?').run(
        entry.accountId,
        group.instanceId,
      )
  }
  q(
    db,
    'INSERT INTO live_charge_groups (id, instance_id, charged_usd, written_at_ms) VALUES (?, ?, ?, ?)',
  ).run(group.id, group.instanceId, moneyText(total), group.nowMs)
  q(db, 'DELETE FROM live_charge_groups WHERE written_at_ms < ?').run(group.nowMs - GROUP_MEMORY_MS)
  return true
}
