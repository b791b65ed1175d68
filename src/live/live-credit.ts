/**
 * The live path's credit ledger, one per gateway instance (docs/live.md). A live call is held before
 * it is sent: `reserve` takes its ceiling from a block of the account's credit this instance
 * leases in the store (LiveCreditStore), topping the block up when short — one store call in
 * flight per account, shared by every call waiting on it — and refuses when the store cannot give
 * it. `settle` moves the real cost into the pending charges and returns the rest to the block.
 *
 * Terminology
 * - lease: what the store holds for this instance and account; it counts as held everywhere.
 * - reserved: the ceilings of this instance's calls still running.
 * - pending: costs of answered calls not yet written; a group write debits them from the
 *   balance and shrinks the lease by as much, in one transaction, idempotent by group id.
 * - free: lease − reserved − pending − what a group write in flight takes out of the lease.
 *
 * So the request path never writes to the store: charges go out every `chargeIntervalMs` in one
 * group, the lease is renewed every third of its TTL while the instance has one, handed back
 * once an account has had no live call here for `idleMs`, and expires by itself when the
 * instance dies. A SIGKILL loses at most the charges not yet written (one interval, plus the
 * write in flight) and never charges twice.
 */
import { newId } from '../domain.ts'
import { toUnits, unitsText } from '../money/fixed-point.ts'
import type { DailyLimitRefusal, LiveCreditStore } from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'

export interface LiveCreditOptions {
  instanceId: string
  /** How often pending charges are written, in one group. */
  chargeIntervalMs: number
  /** A lease not renewed for this long counts for nothing. */
  leaseTtlMs: number
  /** An account with no live call here for this long gets its lease handed back. */
  idleMs: number
  /** A top-up asks for this many of the call's ceiling at once (bounded by the store). */
  blockCalls: number
  logger: Logger
  now?: () => number
}

/** One call's hold. Settled once; later settles do nothing. */
export interface Reservation {
  readonly accountId: string
  readonly units: bigint
  settled: boolean
}

export type ReserveResult =
  | { ok: true; reservation: Reservation }
  /** `dailyLimit`: the account's daily spend limit is what the call would pass (docs/money-and-limits.md). */
  | { ok: false; availableUsd: string; dailyLimit?: DailyLimitRefusal }

export interface LiveCredit {
  /** Holds `ceiling` (units of fixed-point.ts) for one call. */
  reserve(accountId: string, ceiling: bigint): Promise<ReserveResult>
  /** The call's real cost in units; `null` when it failed or was abandoned: the whole hold comes back. */
  settle(reservation: Reservation, cost: bigint | null): void
  /** Writes the pending charges now (and hands back idle leases); resolves when written. */
  flush(): Promise<void>
  /**
   * Hands back now what this instance holds of the account's credit and no call of its uses
   * (with the account's pending charges), so that a batch's admission finds it available: the
   * block a live call leased would otherwise count as held for up to `idleMs` after it. Resolves
   * true when there was such credit to hand back.
   */
  handBack(accountId: string): Promise<boolean>
  /** Graceful stop: writes what is pending and returns every lease. */
  stop(): Promise<void>
}

interface AccountCredit {
  id: string
  lease: bigint
  reserved: bigint
  pending: bigint
  /** In the group being written: charges, and lease handed back. */
  writing: bigint
  releasing: bigint
  calls: number
  lastUsedMs: number
  /** Until when the store has confirmed the lease; only a confirmed lease serves calls. */
  confirmedUntilMs: number
  /** The top-up in flight: resolves with what the store had left after it. */
  topUp: Promise<bigint> | null
  /** Ceilings the next top-up asks for: doubles with each, so a busy account soon needs few. */
  block: number
  /** Store calls begun for this account (top-ups, group writes): tells whether one overlapped another. */
  changes: number
  /** The daily limit the last top-up found in the way, if it was. */
  dailyLimit?: DailyLimitRefusal
  /** Its free lease goes back with the next group, idle or not (handBack). */
  handBack: boolean
}

interface Group {
  id: string
  entries: { account: AccountCredit; chargeUsd: string; releaseUsd: string }[]
}

/** Rounds of "top up, look again" one reserve may take before it answers with what it saw. */
const MAX_ROUNDS = 4
/**
 * How far a block grows, in multiples of the configured size: 32 ceilings doubling to 512. A
 * call returns its ceiling less its cost at once, so a block is used up only by costs: with
 * real max_tokens (costs a few percent of the ceiling) 512 ceilings last thousands of calls, and
 * even the bench's (cost 60% of the ceiling, 7,000 calls/s) tops up about 8 times a second, a
 * store transaction each. Larger blocks would hold more of the account from batches and from
 * the fleet's other instances (the store grants at most half of what is available anyway).
 */
const MAX_GROWTH = 16

const free = (a: AccountCredit) => a.lease - a.reserved - a.pending - a.writing - a.releasing

export function createLiveCredit(store: LiveCreditStore, options: LiveCreditOptions): LiveCredit {
  return new LiveCreditLedger(store, options)
}

/** The ledger's state and its steps, each a method: reserve and settle on the call's path, the rest on timers. */
class LiveCreditLedger implements LiveCredit {
  private readonly accounts = new Map<string, AccountCredit>()
  private readonly now: () => number
  private readonly logger: Logger
  /**
   * A lease is used only while its confirmed expiry is more than a third of the TTL away, so a
   * missed heartbeat stops this instance well before another may count the lease as gone.
   */
  private readonly margin: number
  private writing: Promise<void> | null = null
  private retry: Group | null = null
  private stopped = false
  private readonly charging: ReturnType<typeof setInterval>
  private readonly heartbeat: ReturnType<typeof setInterval>

  constructor(
    private readonly store: LiveCreditStore,
    private readonly options: LiveCreditOptions,
  ) {
    this.now = options.now ?? Date.now
    this.logger = options.logger
    this.margin = Math.floor(options.leaseTtlMs / 3)
    this.charging = setInterval(() => {
      if (!this.writing) void this.flushGroup(false)
    }, options.chargeIntervalMs)
    this.heartbeat = setInterval(
      () => void this.renew(),
      Math.max(50, Math.floor(options.leaseTtlMs / 3)),
    )
    this.charging.unref?.()
    this.heartbeat.unref?.()
  }

  private account(id: string): AccountCredit {
    let a = this.accounts.get(id)
    if (!a) {
      a = {
        id,
        lease: 0n,
        reserved: 0n,
        pending: 0n,
        writing: 0n,
        releasing: 0n,
        calls: 0,
        lastUsedMs: this.now(),
        confirmedUntilMs: 0,
        topUp: null,
        block: this.options.blockCalls,
        changes: 0,
        handBack: false,
      }
      this.accounts.set(id, a)
    }
    return a
  }

  /**
   * Takes the store's word for the lease when no group write overlapped the call (so none can
   * be counted twice or not at all); else applies the change alone. Either way a lease the store
   * no longer has (expired, then deleted by another instance) stops serving here.
   */
  private learnLease(
    a: AccountCredit,
    seen: { changes: number; wasQuiet: boolean },
    leaseUsd: string,
    delta: bigint,
  ) {
    if (seen.wasQuiet && quiet(a, seen.changes)) {
      const lease = toUnits(leaseUsd, 'down')
      if (lease < a.lease)
        this.logger.warn('live.lease_shrunk', {
          account_id: a.id,
          expected_usd: unitsText(a.lease),
          lease_usd: leaseUsd,
        })
      a.lease = lease
    } else a.lease = a.lease + delta > 0n ? a.lease + delta : 0n
  }

  private startTopUp(a: AccountCredit, need: bigint): Promise<bigint> {
    const shortfall = need > free(a) ? need - (free(a) > 0n ? free(a) : 0n) : 0n
    const want = need * BigInt(a.block)
    a.block = Math.min(a.block * 2, this.options.blockCalls * MAX_GROWTH)
    const at = this.now()
    const expiresAtMs = at + this.options.leaseTtlMs
    const changes = ++a.changes
    const seen = { changes, wasQuiet: quiet(a, changes) }
    const call = this.store
      .takeLiveCredit({
        instanceId: this.options.instanceId,
        accountId: a.id,
        needUsd: unitsText(shortfall),
        wantUsd: unitsText(want > shortfall ? want : shortfall),
        nowMs: at,
        expiresAtMs,
      })
      .then((taken) => {
        const lost = toUnits(taken.lostUsd, 'up')
        // Not renewed in time (the store out of reach longer than the TTL): another instance may
        // have counted it as gone, so what it held serves nothing more.
        if (lost > 0n)
          this.logger.warn('live.lease_expired', { account_id: a.id, lost_usd: taken.lostUsd })
        this.learnLease(a, seen, taken.leaseUsd, toUnits(taken.grantedUsd, 'down') - lost)
        a.dailyLimit = taken.dailyLimit
        if (a.lease > 0n) a.confirmedUntilMs = expiresAtMs
        return toUnits(taken.availableUsd, 'down')
      })
      .finally(() => {
        a.topUp = null
      })
    a.topUp = call
    return call
  }

  async reserve(accountId: string, need: bigint): Promise<ReserveResult> {
    const a = this.account(accountId)
    let known: bigint | null = null
    for (let round = 0; ; round++) {
      // A $0 ceiling (a free offering) holds nothing, so it needs no lease: one is never taken
      // for it (the store grants nothing for nothing), and waiting for one would refuse the call.
      const fits = need === 0n || (free(a) >= need && this.now() < a.confirmedUntilMs - this.margin)
      if (!this.stopped && fits) {
        a.reserved += need
        a.calls++
        a.lastUsedMs = this.now()
        return { ok: true, reservation: { accountId, units: need, settled: false } }
      }
      const here = free(a) > 0n ? free(a) : 0n
      // The store said what it had left a moment ago: not enough, so no second ask.
      if (this.stopped || (known !== null && (here + known < need || round >= MAX_ROUNDS))) {
        return {
          ok: false,
          availableUsd: unitsText(here + (known ?? 0n)),
          ...(a.dailyLimit && { dailyLimit: a.dailyLimit }),
        }
      }
      known = await (a.topUp ?? this.startTopUp(a, need))
    }
  }

  settle(reservation: Reservation, cost: bigint | null) {
    if (reservation.settled) return
    reservation.settled = true
    const a = this.account(reservation.accountId)
    a.reserved -= reservation.units
    a.calls--
    a.lastUsedMs = this.now()
    if (cost === null) return
    if (cost > reservation.units) {
      this.logger.warn('live.cost_over_hold', {
        account_id: a.id,
        cost_usd: unitsText(cost),
        held_usd: unitsText(reservation.units),
      })
    }
    a.pending += cost
  }

  /** The next group: every account's pending charges, and the free lease of idle accounts. */
  private nextGroup(all: boolean): Group | null {
    const at = this.now()
    const entries: Group['entries'] = []
    for (const a of this.accounts.values()) {
      const idle =
        all || (a.calls === 0 && a.topUp === null && at - a.lastUsedMs >= this.options.idleMs)
      // A lease asked back while calls run: only its free part, what they reserved stays.
      // Asked back while a top-up is out: after it lands, else the top-up's grant and this
      // release cross, and a call waiting on the top-up finds less than it was given.
      const handing = a.handBack && a.topUp === null
      if (handing) a.handBack = false
      const release = (idle || handing) && free(a) > 0n ? free(a) : 0n
      if (a.pending === 0n && release === 0n) {
        if (idle && a.lease === 0n && a.writing === 0n && a.calls === 0 && a.topUp === null)
          this.accounts.delete(a.id)
        continue
      }
      a.writing = a.pending
      a.releasing = release
      a.pending = 0n
      a.changes++
      entries.push({ account: a, chargeUsd: unitsText(a.writing), releaseUsd: unitsText(release) })
    }
    return entries.length > 0 ? { id: newId('lcg_'), entries } : null
  }

  private async write(all: boolean) {
    const group = this.retry ?? this.nextGroup(all)
    if (!group) return
    this.retry = group
    try {
      const entries = group.entries.map(({ account: a, chargeUsd, releaseUsd }) => ({
        accountId: a.id,
        chargeUsd,
        releaseUsd,
      }))
      // false: an earlier attempt of this very group was written (its answer was lost).
      await this.store.writeLiveCharges({
        id: group.id,
        instanceId: this.options.instanceId,
        nowMs: this.now(),
        entries,
      })
      this.retry = null
      for (const { account: a } of group.entries) {
        a.lease -= a.writing + a.releasing
        if (a.lease < 0n) a.lease = 0n
        a.writing = 0n
        a.releasing = 0n
      }
    } catch (error) {
      // Kept, with its id, and tried again next time: written at most once whatever happened.
      this.logger.warn('live.charge_write_failed', {
        group_id: group.id,
        accounts: group.entries.length,
        reason: String(error),
      })
    }
  }

  private flushGroup(all: boolean): Promise<void> {
    // A caller who asks while a group is being written wants what settled since written too.
    if (this.writing) return this.writing.then(() => this.flushGroup(all))
    this.writing = this.write(all).finally(() => {
      this.writing = null
    })
    return this.writing
  }

  flush(): Promise<void> {
    return this.flushGroup(false)
  }

  async handBack(accountId: string): Promise<boolean> {
    const a = this.accounts.get(accountId)
    if (!a || free(a) <= 0n) return false
    if (a.topUp) await a.topUp.catch(() => 0n)
    a.handBack = true
    await this.flushGroup(false)
    return true
  }

  private async renew() {
    const renewing = [...this.accounts.values()].filter((a) => a.lease > 0n && a.topUp === null)
    if (renewing.length === 0) return
    const at = this.now()
    const expiresAtMs = at + this.options.leaseTtlMs
    const before = renewing.map((a) => ({ a, changes: a.changes, wasQuiet: quiet(a, a.changes) }))
    try {
      const renewed = new Map(
        (
          await this.store.renewLiveCredit(
            this.options.instanceId,
            renewing.map((a) => a.id),
            at,
            expiresAtMs,
          )
        ).map((r) => [r.accountId, r.leaseUsd]),
      )
      for (const seen of before) {
        const { a } = seen
        const lease = renewed.get(a.id)
        if (lease !== undefined) {
          this.learnLease(a, seen, lease, 0n)
          a.confirmedUntilMs = expiresAtMs
        } else if (seen.wasQuiet && quiet(a, seen.changes)) {
          this.logger.warn('live.lease_gone', {
            account_id: a.id,
            expected_usd: unitsText(a.lease),
          })
          a.lease = 0n
          a.confirmedUntilMs = 0
        }
      }
    } catch (error) {
      this.logger.warn('live.lease_renew_failed', {
        accounts: renewing.length,
        reason: String(error),
      })
    }
  }

  async stop() {
    this.stopped = true
    clearInterval(this.charging)
    clearInterval(this.heartbeat)
    // Calls still running past the drain are cut off when the gateway closes its upstream
    // connections (stop-gateway.ts); what they held comes back here.
    for (
      let attempt = 0;
      attempt < 3 &&
      (this.retry || [...this.accounts.values()].some((a) => a.pending > 0n || a.lease > 0n));
      attempt++
    ) {
      await this.flushGroup(true)
    }
    await this.store
      .dropLiveCredit(this.options.instanceId)
      .catch((error) => this.logger.warn('live.lease_drop_failed', { reason: String(error) }))
  }
}

/** No other store call touched the account since `changes` was read: the store's amount is the truth. */
const quiet = (a: AccountCredit, changes: number) =>
  a.changes === changes && a.writing === 0n && a.releasing === 0n
