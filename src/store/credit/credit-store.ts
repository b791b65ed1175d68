/**
 * Credit: every hold on an account's balance beside its batches' (docs/money-and-limits.md,
 * docs/live.md). An instance leases credit for its live calls, a hold in the store like a
 * batch's, so available credit is balance − batch holds − unexpired leases on every instance;
 * the daily spend limit bounds what the day's batches, live charges and leases may use. The
 * rules both dialects apply are daily-spend.ts's and live-grant.ts's; one implementation a
 * dialect (sqlite-credit.ts, postgres-credit.ts, with their live-credit and leases files), one
 * contract (test/store/credit.test.ts).
 */

/** The daily spend limit (docs/money-and-limits.md). */
export interface DailySpendStore {
  /**
   * The account's daily spend limit (null: none) and what counts against it on the UTC day of
   * `nowMs` (docs/money-and-limits.md): the holds and charges of that day's batches (a batch waiting for
   * credit counts its hold), the live charges written that day, and the live leases held now.
   * Null for a missing account.
   */
  getDailySpend(accountId: string, nowMs: number): Promise<DailySpend | null>
  /** Sets the daily spend limit (null: none); false for a missing account. */
  setDailySpendLimit(accountId: string, limitUsd: string | null): Promise<boolean>
}

/** Decimal strings. */
export interface DailySpend {
  limitUsd: string | null
  usedUsd: string
}

/** A submit or live call the daily limit refuses: the limit and what the day has used. */
export interface DailyLimitRefusal {
  limitUsd: string
  usedUsd: string
}

/**
 * Credit an instance leases for an account's live calls (docs/live.md): a hold in the store, like a
 * batch's, so available credit is balance − batch holds − unexpired leases on every instance.
 * Amounts are decimal strings; times Unix milliseconds.
 */
export interface LiveCreditStore {
  /**
   * Atomically, against admissions and other instances: deletes the account's expired leases,
   * then grows this instance's lease by `max(need, min(want, available / 2))` when at least
   * `need` is available, else by nothing (half, so another instance can still serve the account).
   * Renews the lease to `expiresAtMs` either way. `leaseUsd` is this instance's lease after it;
   * `lostUsd` is what an expired lease of this instance held when it was deleted here;
   * `availableUsd` is what is left for anyone after the grant. With a daily spend limit, what is
   * available is also at most the limit less the day's use (getDailySpend); `dailyLimit` is set
   * when that, not the credit, is what bounds it.
   */
  takeLiveCredit(request: {
    instanceId: string
    accountId: string
    needUsd: string
    wantUsd: string
    nowMs: number
    expiresAtMs: number
  }): Promise<{
    grantedUsd: string
    leaseUsd: string
    availableUsd: string
    lostUsd: string
    dailyLimit?: DailyLimitRefusal
  }>
  /**
   * Extends this instance's unexpired leases of these accounts (an expired one is not brought
   * back: another instance may have counted it as gone); returns those renewed and their amounts.
   */
  renewLiveCredit(
    instanceId: string,
    accountIds: readonly string[],
    nowMs: number,
    expiresAtMs: number,
  ): Promise<{ accountId: string; leaseUsd: string }[]>
  /**
   * In one transaction: debits each account by `chargeUsd` (never below zero) and shrinks this
   * instance's lease by `chargeUsd + releaseUsd` (a lease at zero is deleted). Idempotent by
   * `id`: a group already written is skipped and answers false.
   */
  writeLiveCharges(group: {
    id: string
    instanceId: string
    nowMs: number
    entries: readonly { accountId: string; chargeUsd: string; releaseUsd: string }[]
  }): Promise<boolean>
  /** Graceful stop: deletes every lease of this instance. */
  dropLiveCredit(instanceId: string): Promise<void>
}

/** When a renewal of live leases happens and until when the leases then run (Unix ms). */
export interface LeaseRenewal {
  nowMs: number
  expiresAtMs: number
}
