/**
 * Claim allocation: which runnable batches to claim lines from, and how many, on each turn of the
 * dispatcher's loop. Earliest deadline first within an account, round-robin between accounts due
 * about as soon (so one huge batch cannot starve a small one) and before the accounts due later,
 * bounded by the room left under what this instance keeps in flight and by the room of each
 * batch's offerings, none counted twice. No I/O and no clock of its own: the dispatcher passes in what it read.
 *
 * It says how many lines of which batch, not where they go: each line's offering is the planner's
 * (spill-planner.ts, docs/routing.md), chosen as the line is launched.
 */
import type { RunnableBatch } from '../store/store.ts'

/** Lines to claim from one batch. */
export interface Claim {
  batch: RunnableBatch
  count: number
}

export interface AllocationInput {
  /** The tick's clock (ms). Today's rule does not read it. */
  now: number
  /** Batches with pending lines, in any order. */
  batches: readonly RunnableBatch[]
  /** Lines this instance has claimed and not yet finished. */
  inFlight: number
  /** Accounts none of whose lines may be claimed now (a cost overrun not yet recorded). */
  heldBack: { has(accountId: string): boolean }
  /**
   * The most lines of the batch its offerings can take now (the planner's room); null: no bound
   * of its own. A batch waiting for a full pool leaves its share to the account's next batch.
   */
  room?: (batch: RunnableBatch) => number | null
  /**
   * `count` lines of the batch are claimed on its `room`: batches after it in this allocation
   * that share its offerings have that much less (room never counts a slot twice).
   */
  took?: (batch: RunnableBatch, count: number) => void
}

export interface ClaimAllocator {
  /** Whether a claim's worth of room is free: the loop is woken for no less. */
  hasRoom(inFlight: number): boolean
  /** Whether as many lines are in flight as the allocator keeps. */
  isFull(inFlight: number): boolean
  /** The claims to make now; none without a claim's worth of room or a batch to claim from. */
  allocate(input: AllocationInput): Claim[]
}

/**
 * `capacity` is the upstream slots of every provider together. Lines claimed beyond them wait at
 * their provider's gate and start the moment a slot frees, instead of a store round trip later.
 * Half the slots again covers a claim that waits its turn for the batch row on a busy PostgreSQL
 * (measured: a quarter left 20–25% of the slots idle there; SQLite does as well with either).
 */
export function createClaimAllocator({ capacity }: { capacity: number }): ClaimAllocator {
  const target = capacity + Math.ceil(capacity / 2)
  // Claim in sizeable groups: one claim per line would make the store the bottleneck, and each
  // claim is a message that wakes the SQLite thread (or a PostgreSQL round trip holding the batch
  // row). A quarter of the slots still leaves a quarter waiting at the gate (measured, 256 slots:
  // 64 rather than 32 gave 1.5% more lines/s in each of five alternating pairs of runs).
  const minClaim = Math.min(64, Math.ceil(capacity / 4))
  /** Which account goes first; moves on by one on every allocation that has an account to serve. */
  let turn = 0
  const hasRoom = (inFlight: number) => target - inFlight >= minClaim
  return {
    hasRoom,
    isFull: (inFlight) => inFlight >= target,
    allocate({ batches, inFlight, heldBack, room, took }) {
      if (!hasRoom(inFlight)) return []
      const byAccount = groupByAccount(batches, heldBack)
      if (byAccount.length === 0) return []
      // A batch with no room of its own (lines routed every which way): one claim's worth (all
      // of the room to a batch for a slow pool would wait there, the rest starved).
      const bound = room && ((batch: RunnableBatch) => room(batch) ?? minClaim)
      return spreadOverAccounts(byAccount, target - inFlight, turn++, { room: bound, took })
    },
  }
}

/** Each account's batches, earliest deadline first; the accounts in order of their earliest deadline. */
export function groupByAccount(
  batches: readonly RunnableBatch[],
  heldBack: AllocationInput['heldBack'],
): RunnableBatch[][] {
  // A stable sort: batches due at the same second keep the store's order (by id).
  const byDeadline = [...batches].sort((a, b) => a.deadlineAt - b.deadlineAt)
  const byAccount = new Map<string, RunnableBatch[]>()
  for (const batch of byDeadline) {
    if (heldBack.has(batch.accountId)) continue
    const list = byAccount.get(batch.accountId)
    if (list) list.push(batch)
    else byAccount.set(batch.accountId, [batch])
  }
  return [...byAccount.values()]
}

/**
 * Accounts whose earliest batch is due within this long of the earliest of all take turns; the
 * others come after them, earliest first: a batch due hours earlier gets capacity first (a
 * 24-hour batch before a 72-hour one), while batches due about the same time share it by account.
 */
export const SAME_TURN_SECONDS = 3600

/**
 * Spreads `free` lines over the accounts (in order of their earliest deadline, groupByAccount).
 * The accounts with a batch due about first (within SAME_TURN_SECONDS of the earliest) take
 * turns, starting at `turn` (mod their number), each at most an equal share, with those batches
 * by deadline; then every batch due later, whoever's, earliest first, in what is left. Each batch
 * at most its `room`, told to `took`.
 */
export function spreadOverAccounts(
  accounts: readonly (readonly RunnableBatch[])[],
  free: number,
  turn: number,
  { room = () => null, took }: Pick<AllocationInput, 'room' | 'took'> = {},
): Claim[] {
  const band = (accounts[0]?.[0]?.deadlineAt ?? 0) + SAME_TURN_SECONDS
  const front = accounts.filter((batches) => batches[0].deadlineAt <= band)
  const claims: Claim[] = []
  let left = free
  const claim = (batch: RunnableBatch, quota: number) => {
    const count = Math.min(quota, batch.pending, room(batch) ?? Infinity)
    if (count === 0) return 0
    claims.push({ batch, count })
    took?.(batch, count)
    left -= count
    return count
  }
  const start = turn % Math.max(1, front.length)
  const share = Math.max(1, Math.ceil(free / Math.max(1, front.length)))
  for (let i = 0; i < front.length && left > 0; i++) {
    let quota = Math.min(share, left)
    for (const batch of front[(start + i) % front.length]) {
      if (quota === 0 || batch.deadlineAt > band) break
      quota -= claim(batch, quota)
    }
  }
  // A stable sort: batches due at the same second keep their accounts' order.
  const later = accounts
    .flatMap((batches) => batches.filter((batch) => batch.deadlineAt > band))
    .sort((a, b) => a.deadlineAt - b.deadlineAt)
  for (const batch of later) {
    if (left === 0) break
    claim(batch, left)
  }
  return claims
}
