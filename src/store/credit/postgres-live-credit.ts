/**
 * Live credit leases and charge groups on PostgreSQL (LiveCreditStore in credit-store.ts; the rules are
 * sql/0004_live_credit.sql's). Every change locks the account row first, as admission does, so
 * a lease and a batch hold, or two instances' leases, never both take the same credit: a lease
 * FOR NO KEY UPDATE (it compares balance − held only, which settlements do not move), a group
 * write FOR UPDATE (its charges lower the balance: settlements wait, postgres-account-ledger.ts);
 * a group write locks its accounts in id order, so two never deadlock.
 */
import type postgres from 'postgres'
import { minMoney, Money, moneyText, ZERO } from '../../money/decimal.ts'
import type { LeaseRenewal, LiveCreditStore } from './credit-store.ts'
import { utcDay } from './daily-spend.ts'
import { GROUP_MEMORY_MS, liveAvailable, liveGrant } from './live-grant.ts'
import { dailyUsed } from './postgres-daily-spend.ts'
import { drawn } from './postgres-account-ledger.ts'

type Store = LiveCreditStore

export async function takeLiveCredit(
  sql: postgres.Sql,
  request: Parameters<Store['takeLiveCredit']>[0],
) {
  const { instanceId, accountId, nowMs, expiresAtMs } = request
  return sql.begin(async (tx) => {
    const [account] = await tx`SELECT * FROM accounts WHERE id = ${accountId} FOR NO KEY UPDATE`
    if (!account) return { grantedUsd: '0', leaseUsd: '0', availableUsd: '0', lostUsd: '0' }
    const expired = await tx`
      DELETE FROM credit_leases WHERE account_id = ${accountId} AND expires_at_ms <= ${nowMs}
      RETURNING instance_id, amount_usd`
    const lost = expired.find((row) => row.instance_id === instanceId)
    const [leased] =
      await tx`SELECT coalesce(sum(amount_usd), 0) AS total FROM credit_leases WHERE account_id = ${accountId}`
    const credit = new Money(account.balance_usd).minus(account.held_usd).minus(leased!.total)
    // A lease counts against the daily limit as a hold does, so no call can pass it.
    const used = account.daily_spend_limit_usd === null ? ZERO : await dailyUsed(tx, account, nowMs)
    const { available, dailyLimit } = liveAvailable(credit, account.daily_spend_limit_usd, used)
    const grant = liveGrant(available, new Money(request.needUsd), new Money(request.wantUsd))
    const [mine] = grant.greaterThan(0)
      ? await tx`
          INSERT INTO credit_leases (account_id, instance_id, amount_usd, expires_at_ms)
          VALUES (${accountId}, ${instanceId}, ${moneyText(grant)}::numeric, ${expiresAtMs})
          ON CONFLICT (account_id, instance_id) DO UPDATE
          SET amount_usd = credit_leases.amount_usd + excluded.amount_usd, expires_at_ms = excluded.expires_at_ms
          RETURNING amount_usd`
      : await tx`
          UPDATE credit_leases SET expires_at_ms = ${expiresAtMs}
          WHERE account_id = ${accountId} AND instance_id = ${instanceId} RETURNING amount_usd`
    return {
      grantedUsd: moneyText(grant),
      leaseUsd: mine ? moneyText(mine.amount_usd) : '0',
      availableUsd: moneyText(Money.max(ZERO, available.minus(grant))),
      lostUsd: lost ? moneyText(lost.amount_usd) : '0',
      dailyLimit,
    }
  })
}

/** Renews this instance's live leases of these accounts, at `nowMs`, until `expiresAtMs`. */
export async function renewLiveCredit(
  sql: postgres.Sql,
  instanceId: string,
  accountIds: readonly string[],
  { nowMs, expiresAtMs }: LeaseRenewal,
) {
  // An expired lease is not brought back: another instance may already have counted it as gone.
  const rows = await sql`
    UPDATE credit_leases SET expires_at_ms = ${expiresAtMs}
    WHERE instance_id = ${instanceId} AND account_id = ANY(${[...accountIds]}::text[]) AND expires_at_ms > ${nowMs}
    RETURNING account_id, amount_usd`
  return rows.map((row) => ({
    accountId: row.account_id as string,
    leaseUsd: moneyText(row.amount_usd),
  }))
}

export async function writeLiveCharges(
  sql: postgres.Sql,
  group: Parameters<Store['writeLiveCharges']>[0],
) {
  const entries = [...group.entries].sort((a, b) =>
    a.accountId < b.accountId ? -1 : a.accountId > b.accountId ? 1 : 0,
  )
  const ids = entries.map((entry) => entry.accountId)
  return sql.begin(async (tx) => {
    const [fresh] = await tx`
      INSERT INTO live_charge_groups (id, instance_id, charged_usd, written_at_ms)
      VALUES (${group.id}, ${group.instanceId}, 0, ${group.nowMs})
      ON CONFLICT (id) DO NOTHING RETURNING id`
    if (!fresh) return false
    // Account rows in id order, as every multi-account transaction here takes them.
    const locked = await tx`SELECT a.id, a.balance_usd - ${drawn(tx)} AS balance_usd FROM accounts a
        WHERE a.id = ANY(${ids}::text[]) ORDER BY a.id FOR UPDATE OF a`
    const balances = new Map(locked.map((row) => [row.id as string, new Money(row.balance_usd)]))
    // Never below zero: a lease is at most the balance, but a negative deposit may have come since.
    const charged = entries.map((entry) =>
      minMoney(new Money(entry.chargeUsd), balances.get(entry.accountId) ?? ZERO),
    )
    const total = charged.reduce((sum, amount) => sum.plus(amount), ZERO)
    // The day's live charges, for the daily limit: a counter of the day it was written on.
    const day = utcDay(group.nowMs)
    await tx`
      UPDATE accounts a SET balance_usd = a.balance_usd - c.charge,
        live_spent_usd = CASE WHEN a.live_spend_day = ${day} THEN a.live_spent_usd + c.charge ELSE c.charge END,
        live_spend_day = ${day}
      FROM unnest(${ids}::text[], ${charged.map((amount) => moneyText(amount))}::numeric[]) AS c(id, charge)
      WHERE a.id = c.id`
    const shrink = entries.map((entry) =>
      moneyText(new Money(entry.chargeUsd).plus(entry.releaseUsd)),
    )
    await tx`
      UPDATE credit_leases l SET amount_usd = GREATEST(0, l.amount_usd - c.shrink)
      FROM unnest(${ids}::text[], ${shrink}::numeric[]) AS c(id, shrink)
      WHERE l.account_id = c.id AND l.instance_id = ${group.instanceId}`
    await tx`DELETE FROM credit_leases WHERE instance_id = ${group.instanceId} AND account_id = ANY(${ids}::text[]) AND amount_usd = 0`
    await tx`UPDATE live_charge_groups SET charged_usd = ${moneyText(total)}::numeric WHERE id = ${group.id}`
    await tx`DELETE FROM live_charge_groups WHERE written_at_ms < ${group.nowMs - GROUP_MEMORY_MS}`
    return true
  })
}
