/**
 * The planner's memory on one instance (docs/routing.md): for each batch with lines here, how many of
 * them each provider holds and how fast they complete there; for each provider, how many lines
 * of every batch it holds. It feeds plan-spill.ts with that and keeps nothing else: the clock is
 * passed into every call, availability and concurrency come from the caller, so bench/plan.ts
 * drives this very code in simulated time.
 */
import { chooseOffering, projectFinish, type OfferingView, type SpillChoice } from './plan-spill.ts'
import { ThroughputMeter } from './throughput-meter.ts'
import type { ProviderShare } from '../coordination/fleet-rates.ts'

/** A batch as the planner needs it: its deadline and how long its window is (for the margin). */
export interface PlannedBatch {
  id: string
  /** Unix seconds. */
  createdAt: number
  deadlineAt: number
}

export interface SpillPlannerOptions {
  /** The safety margin as a share of the batch's window (MULTIGRID_SPILL_MARGIN). */
  marginShare: number
  /** Whether the provider can be sent to now (no replica up, or paused on a 429: false). */
  available(provider: string, nowMs: number): boolean
  /** Whether every replica of the provider is out and unreachable (not merely paused). */
  unreachable(provider: string): boolean
  /** The provider's concurrency: more lines than this sent there wait for a slot. */
  limit(provider: string): number
  /** Until when (Unix ms) a 429 paused the provider, 0 when it is not paused: a batch waits for it. */
  pausedUntil?(provider: string, nowMs: number): number
  /**
   * In a fleet (rates shared through fleetRates): a batch's own rates are not acted on before
   * the fleet's first came, since alone they read each provider as slower than it is.
   */
  fleet?: boolean
}

/** A call that ended at `nowMs` after `serviceMs` in service; `ok` when it succeeded. */
export interface EndedCall {
  nowMs: number
  serviceMs: number
  ok: boolean
}

/**
 * Room at each provider given to batches earlier in one claim allocation, not yet held there
 * (their lines are launched after the allocation): by provider.
 */
export type TakenRoom = Map<string, number>

export interface SpillPlanner {
  /** Which of `providers` (in preference order) takes the batch's next line, `unsent` lines of it not sent anywhere yet. */
  choose(
    batch: PlannedBatch,
    providers: readonly string[],
    unsent: number,
    nowMs: number,
  ): SpillChoice
  /**
   * How many more of the batch's lines the offerings its next lines would go to can take (for
   * each list of providers its lines were chosen among, `unsent` lines of it pending): the room
   * left there under their slots and one more round waiting, of every batch's lines. 0 while
   * nothing can take one (every provider down, or the offering it waits for is full); null for a
   * batch not planned here yet.
   * The claim allocator claims no more: lines beyond would wait in this instance's memory, not
   * the store, holding room other batches' providers could use (docs/routing.md).
   */
  room(batch: PlannedBatch, unsent: number, nowMs: number, taken?: TakenRoom): number | null
  /**
   * `count` of the batch's lines are claimed on the room `room` gave (with the same `taken`):
   * noted in `taken`, so a batch after it in the same allocation does not count that room again.
   */
  take(
    batch: PlannedBatch,
    count: number,
    at: { unsent: number; nowMs: number },
    taken: TakenRoom,
  ): void
  /** A line of the batch was handed to the provider (it waits for a slot there, or runs). */
  enter(batchId: string, provider: string): void
  /** It took a slot and was sent. */
  started(batchId: string, provider: string, nowMs: number): void
  /** Its call there ended (only for lines that started). */
  ended(batchId: string, provider: string, call: EndedCall): void
  /** It left the provider (ended, or gave up its place unsent). */
  leave(batchId: string, provider: string): void
  available(provider: string, nowMs: number): boolean
  unreachable(provider: string): boolean
  /** Projected finish of the batch's `remaining` lines, Unix seconds; null before it can tell. */
  eta(batchId: string, remaining: number, nowMs: number): number | null
  /**
   * Why the batch's lines here do not move, as far as the planner knows (`providers`: the ones
   * it may go to, named for the message); null when they do.
   */
  waiting(
    batchId: string,
    nowMs: number,
  ):
    | { code: 'provider_unavailable' | 'capacity_busy'; providers: string }
    | { code: 'provider_rate_limited'; providers: string; untilMs: number }
    | null
  /** This instance's figures of the batch on each provider it knows of (for the other instances). */
  localShares(batchId: string, nowMs: number): Map<string, ProviderShare>
  /**
   * What the other instances of a fleet hold and measure of the batch (fleet-rates.ts): each
   * instance sees only its own lines, so its decisions and the ETA are taken with theirs added,
   * for a few seconds after this.
   */
  fleetShares(batchId: string, others: ReadonlyMap<string, ProviderShare>, nowMs: number): void
  /** What the other instances measure of the batch, lines per second (0 without a fleet). */
  othersRate(batchId: string, nowMs: number): number
  /**
   * The providers holding this instance's lines of other batches due no later than
   * `deadlineAt` (Unix seconds), named for a waiting message; null when there are none. With
   * `ownOnly`, only the providers this batch's own lines may go to count.
   */
  busyAhead(batchId: string, deadlineAt: number, ownOnly?: boolean): string | null
  /** The batches it has state of. */
  batchIds(): string[]
  /** When it last chose for a line of the batch (Unix ms; 0 for a batch it does not know). */
  lastSeen(batchId: string): number
  /** The batch has no line here any more. */
  forget(batchId: string): void
}

interface BatchState {
  /** Provider → this batch's lines held there. */
  queued: Map<string, number>
  /** Providers it was last told to choose among (for the ETA and the waiting reason). */
  providers: readonly string[]
  /**
   * Every list of providers its lines were chosen among (a batch that mixes models or routings
   * has several), for its room: one model's provider paused must not stop the others' lines.
   */
  lists: (readonly string[])[]
  /** Set when nothing could take its last line: every allowed provider unavailable. */
  heldSince: number | null
  seenAt: number
  /** Unix seconds; until the planner chose for one of its lines, unknown: taken as due first. */
  deadlineAt: number
  /** The other instances' figures per provider (fleetShares), when they were told, and first told. */
  fleet: ReadonlyMap<string, ProviderShare> | null
  fleetAt: number
  fleetSince: number | null
}

/** Other instances' figures older than this (two missed exchanges) are not used. */
const FLEET_SHARES_MS = 2_500
/** From the first exchange, a little over one more: every instance has published its figures. */
const FLEET_SETTLE_MS = 1_500

const SEND_FIRST: SpillChoice = { kind: 'send', index: 0 }
const HOLD: SpillChoice = { kind: 'hold' }

export function createSpillPlanner(options: SpillPlannerOptions): SpillPlanner {
  const meter = new ThroughputMeter()
  const batches = new Map<string, BatchState>()
  /** Provider → lines of every batch held there. */
  const held = new Map<string, number>()
  // The meter's key of a batch and provider, made once (it is asked for twice on every line).
  const keys = new Map<string, Map<string, string>>()
  const key = (batchId: string, provider: string) => {
    let byProvider = keys.get(batchId)
    if (!byProvider) keys.set(batchId, (byProvider = new Map()))
    let made = byProvider.get(provider)
    if (made === undefined) byProvider.set(provider, (made = `${batchId}\u0000${provider}`))
    return made
  }

  const state = (batchId: string): BatchState => {
    let s = batches.get(batchId)
    if (!s)
      batches.set(
        batchId,
        (s = {
          queued: new Map(),
          providers: [],
          lists: [],
          heldSince: null,
          seenAt: 0,
          deadlineAt: -Infinity,
          fleet: null,
          fleetAt: 0,
          fleetSince: null,
        }),
      )
    return s
  }
  const planning: Planning = { options, meter, batches, held, key }

  return {
    choose(batch, providers, unsent, nowMs) {
      const s = state(batch.id)
      if (!sameList(s.providers, providers)) remember(s, providers)
      s.providers = providers
      s.seenAt = nowMs
      s.deadlineAt = batch.deadlineAt
      const choice = decide(planning, s, batch, { providers, unsent, nowMs })
      s.heldSince = choice.kind === 'hold' ? (s.heldSince ?? nowMs) : null
      return choice
    },
    room(batch, unsent, nowMs, taken) {
      const s = batches.get(batch.id)
      if (!s || s.lists.length === 0 || s.lists.length > MAX_LISTS) return null
      let room = 0
      for (const provider of roomTakers(planning, s, batch, { unsent, nowMs }))
        room += roomAt(planning, provider, taken)
      return room
    },
    take(batch, count, at, taken) {
      const s = batches.get(batch.id)
      if (!s || s.lists.length === 0 || s.lists.length > MAX_LISTS) return
      // The providers' room in the order the batch's lists reach them: the first fills first.
      let left = count
      for (const provider of roomTakers(planning, s, batch, at)) {
        if (left === 0) break
        const used = Math.min(left, roomAt(planning, provider, taken))
        taken.set(provider, (taken.get(provider) ?? 0) + used)
        left -= used
      }
    },
    enter(batchId, provider) {
      const s = state(batchId)
      s.queued.set(provider, (s.queued.get(provider) ?? 0) + 1)
      held.set(provider, (held.get(provider) ?? 0) + 1)
    },
    started(batchId, provider, nowMs) {
      meter.started(key(batchId, provider), nowMs)
    },
    ended(batchId, provider, call) {
      meter.ended(key(batchId, provider), call.nowMs, call.serviceMs, call.ok)
    },
    leave(batchId, provider) {
      const s = batches.get(batchId)
      if (s) s.queued.set(provider, Math.max(0, (s.queued.get(provider) ?? 0) - 1))
      held.set(provider, Math.max(0, (held.get(provider) ?? 0) - 1))
    },
    available: options.available,
    unreachable: options.unreachable,
    eta(batchId, remaining, nowMs) {
      const s = batches.get(batchId)
      if (!s) return null
      const rates = s.providers.map((p) => {
        // Down, it adds nothing; paused on a 429 it is only between two allowances (docs/routing.md: a
        // paced provider's rate is what it allows, pauses included).
        if (options.unreachable(p)) return 0
        return together(meter.rate(key(batchId, p), nowMs).perSecond, otherShare(s, p, nowMs))
      })
      const finish = projectFinish(nowMs, remaining, rates)
      return finish === null ? null : Math.ceil(finish / 1000)
    },
    waiting: (batchId, nowMs) => waitingReason(planning, batchId, nowMs),
    localShares(batchId, nowMs) {
      const shares = new Map<string, ProviderShare>()
      const s = batches.get(batchId)
      if (!s) return shares
      for (const p of new Set([...s.providers, ...s.queued.keys()]))
        shares.set(p, {
          perSecond: meter.rate(key(batchId, p), nowMs).perSecond,
          queued: s.queued.get(p) ?? 0,
        })
      return shares
    },
    fleetShares(batchId, others, nowMs) {
      const s = batches.get(batchId)
      if (!s) return
      s.fleet = others
      s.fleetAt = nowMs
      s.fleetSince ??= nowMs
    },
    othersRate(batchId, nowMs) {
      const s = batches.get(batchId)
      if (!s) return 0
      let total = 0
      for (const p of s.providers) total += otherShare(s, p, nowMs)?.perSecond ?? 0
      return total
    },
    busyAhead(batchId, deadlineAt, ownOnly = false) {
      const own = ownOnly ? new Set(batches.get(batchId)?.providers ?? []) : null
      const providers = new Set<string>()
      for (const [id, s] of batches) {
        if (id === batchId || s.deadlineAt > deadlineAt) continue
        for (const [p, n] of s.queued) if (n > 0 && (own === null || own.has(p))) providers.add(p)
      }
      return providers.size > 0 ? [...providers].sort().join(', ') : null
    },
    batchIds: () => [...batches.keys()],
    lastSeen: (batchId) => batches.get(batchId)?.seenAt ?? 0,
    forget(batchId) {
      const s = batches.get(batchId)
      if (!s) return
      for (const p of s.providers) meter.forget(key(batchId, p))
      for (const p of s.queued.keys()) meter.forget(key(batchId, p))
      batches.delete(batchId)
      keys.delete(batchId)
    },
  }
}

/** What the planner's steps share: its options, its meter and what it knows of each batch. */
interface Planning {
  options: SpillPlannerOptions
  meter: ThroughputMeter
  batches: Map<string, BatchState>
  /** Provider → lines of every batch held there. */
  held: Map<string, number>
  /** The meter's key of a batch and provider. */
  key: (batchId: string, provider: string) => string
}

/** A batch with more lists than this (lines routed every which way) gets no room of its own. */
const MAX_LISTS = 8

const sameList = (a: readonly string[], b: readonly string[]) =>
  a === b || (a.length === b.length && a.every((provider, i) => provider === b[i]))

/** Keeps `providers` among the batch's lists (one more than MAX_LISTS marks it as too many). */
function remember(s: BatchState, providers: readonly string[]) {
  if (s.lists.length > MAX_LISTS || s.lists.some((list) => sameList(list, providers))) return
  s.lists.push(providers)
}

/**
 * The offerings the batch's next lines go to now (SpillPlanner.room takes their room): for each
 * of its lists the one its next line goes to, each offering once.
 */
function roomTakers(
  planning: Planning,
  s: BatchState,
  batch: PlannedBatch,
  { unsent, nowMs }: { unsent: number; nowMs: number },
): Set<string> {
  const takers = new Set<string>()
  for (const providers of s.lists) {
    const first = decide(planning, s, batch, { providers, unsent, nowMs })
    if (first.kind === 'hold') continue
    takers.add(providers[first.index])
    // The lines past that offering's room meet it full: where those go (a spill, when the batch
    // needs one) takes its room too, or the planner would never see the pool full.
    const past = decide(planning, s, batch, {
      providers,
      unsent,
      nowMs,
      full: providers[first.index],
    })
    if (past.kind === 'send') takers.add(providers[past.index])
  }
  return takers
}

/**
 * An offering's room: its slots and one more round waiting, less every batch's lines there and
 * the room given in this allocation already (`taken`); under half its slots, none, so a batch is
 * claimed in rounds rather than a line each time one ends (a store round trip per claim).
 */
function roomAt({ options, held }: Planning, provider: string, taken?: TakenRoom): number {
  const limit = options.limit(provider)
  const room = 2 * limit - (held.get(provider) ?? 0) - (taken?.get(provider) ?? 0)
  return room >= Math.ceil(limit / 2) ? room : 0
}

/** Which of `providers` takes the batch's next line: chooseOffering's rule. */
function decide(
  planning: Planning,
  s: BatchState,
  batch: PlannedBatch,
  {
    providers,
    unsent,
    nowMs,
    full,
  }: {
    providers: readonly string[]
    unsent: number
    nowMs: number
    /** A provider taken as full, whatever it holds (what its room leaves over). */
    full?: string
  },
): SpillChoice {
  const { options } = planning
  // One offering (allow_fallbacks false, or a model with one): nothing to weigh.
  if (providers.length === 1) return options.available(providers[0], nowMs) ? SEND_FIRST : HOLD
  const windowMs = (batch.deadlineAt - batch.createdAt) * 1000
  const targetMs = batch.deadlineAt * 1000 - options.marginShare * windowMs
  // In a fleet a provider's rate for the batch is every instance's together, and so are the
  // lines held there. It is not known (the line waits, as before any answer) until every
  // instance had an exchange to tell its own, nor while another holds lines there with no
  // rate yet: measured, an instance that planned from its own half of the pool's rate spilled
  // a fifth of a batch the pool could finish in two thirds of its window.
  const settling =
    options.fleet === true && (s.fleetSince === null || nowMs - s.fleetSince < FLEET_SETTLE_MS)
  const views = offeringViews(planning, s, batch.id, { providers, settling, nowMs, full })
  return chooseOffering({ nowMs, targetMs, unsent, offerings: views })
}

/** Each of the batch's offerings as the choice weighs it: up, room, queue, slots and rate. */
function offeringViews(
  { options, meter, held, key }: Planning,
  s: BatchState,
  batchId: string,
  {
    providers,
    settling,
    nowMs,
    full,
  }: { providers: readonly string[]; settling: boolean; nowMs: number; full?: string },
): OfferingView[] {
  return providers.map((provider) => {
    const mine = meter.rate(key(batchId, provider), nowMs).perSecond
    const others = otherShare(s, provider, nowMs)
    const unknown = settling || (others !== null && others.perSecond === null && others.queued > 0)
    const perSecond = unknown ? null : together(mine, others)
    return {
      available: options.available(provider, nowMs),
      // A round of lines waiting beyond the slots: a slot that frees is taken at once from the
      // provider's own queue, not a claim later (measured: without it a spilling batch left
      // the pool's slots idle between claims, read the idle time as a lower rate, and spilled
      // 3–4% of its lines more than it needed to).
      hasRoom: provider !== full && (held.get(provider) ?? 0) < 2 * options.limit(provider),
      queued: (s.queued.get(provider) ?? 0) + (others?.queued ?? 0),
      slots: options.limit(provider),
      perSecond,
    }
  })
}

/** Why a batch's lines wait, as far as the planner knows; null when they do not (or it cannot tell). */
function waitingReason(
  { options, meter, batches, key }: Planning,
  batchId: string,
  nowMs: number,
): ReturnType<SpillPlanner['waiting']> {
  const s = batches.get(batchId)
  if (!s || s.providers.length === 0) return null
  const providers = s.providers.join(', ')
  // Held back unsent: every provider it may go to is out and unreachable (a pause is the
  // 429's own reason).
  if (s.heldSince !== null && s.providers.every((p) => options.unreachable(p)))
    return { code: 'provider_unavailable', providers }
  // Held back unsent while every provider it may go to is out or paused on a 429, another
  // batch's 429 maybe: it waits for the first pause to end.
  if (s.heldSince !== null && !s.providers.some((p) => options.available(p, nowMs))) {
    const pauses = s.providers
      .map((p) => [p, options.pausedUntil?.(p, nowMs) ?? 0] as const)
      .filter(([, until]) => until > 0)
      .sort((a, b) => a[1] - b[1])
    if (pauses.length > 0)
      return { code: 'provider_rate_limited', providers: pauses[0][0], untilMs: pauses[0][1] }
  }
  // Lines handed to available providers, none of them in service, while lines of batches due
  // no later than this one hold those providers: they wait behind them (docs/routing.md). Behind a
  // batch due later it is the fair share between accounts, not a full offering: no reason.
  let queued = 0
  let running = 0
  for (const p of s.providers) {
    if (!options.available(p, nowMs)) return null
    queued += s.queued.get(p) ?? 0
    running += meter.rate(key(batchId, p), nowMs).running
  }
  if (queued === 0 || running > 0) return null
  for (const [otherId, other] of batches) {
    if (otherId === batchId || other.deadlineAt > s.deadlineAt) continue
    for (const p of s.providers)
      if ((other.queued.get(p) ?? 0) > 0) return { code: 'capacity_busy', providers }
  }
  return null
}

/** This instance's rate there and the other instances' together; null while none has one. */
function together(mine: number | null, others: ProviderShare | null): number | null {
  const theirs = others?.perSecond ?? null
  return mine === null && theirs === null ? null : (mine ?? 0) + (theirs ?? 0)
}

/** The other instances' figures of the batch on the provider, if told lately. */
function otherShare(s: BatchState, provider: string, nowMs: number): ProviderShare | null {
  if (s.fleet === null || nowMs - s.fleetAt > FLEET_SHARES_MS) return null
  return s.fleet.get(provider) ?? null
}
