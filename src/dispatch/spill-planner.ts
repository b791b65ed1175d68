/**
 * The planner's memory on one instance (SPEC §13): for each batch with lines here, how many of
 * them each provider holds and how fast they complete there; for each provider, how many lines
 * of every batch it holds. It feeds plan-spill.ts with that and keeps nothing else: the clock is
 * passed into every call, availability and concurrency come from the caller, so bench/plan.ts
 * drives this very code in simulated time.
 */
import { chooseOffering, projectFinish, type OfferingView, type SpillChoice } from './plan-spill.ts'
import { ThroughputMeter } from './throughput-meter.ts'

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
}

export interface SpillPlanner {
  /** Which of `providers` (in preference order) takes the batch's next line, `unsent` lines of it not sent anywhere yet. */
  choose(
    batch: PlannedBatch,
    providers: readonly string[],
    unsent: number,
    nowMs: number,
  ): SpillChoice
  /** A line of the batch was handed to the provider (it waits for a slot there, or runs). */
  enter(batchId: string, provider: string): void
  /** It took a slot and was sent. */
  started(batchId: string, provider: string, nowMs: number): void
  /** Its call there ended after `serviceMs` (only for lines that started). */
  ended(batchId: string, provider: string, nowMs: number, serviceMs: number, ok: boolean): void
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
  ): { code: 'provider_unavailable' | 'capacity_busy'; providers: string } | null
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
  /** Set when nothing could take its last line: every allowed provider unavailable. */
  heldSince: number | null
  seenAt: number
  /** Unix seconds; until the planner chose for one of its lines, unknown: taken as due first. */
  deadlineAt: number
}

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
          heldSince: null,
          seenAt: 0,
          deadlineAt: -Infinity,
        }),
      )
    return s
  }

  return {
    choose(batch, providers, unsent, nowMs) {
      const s = state(batch.id)
      s.providers = providers
      s.seenAt = nowMs
      s.deadlineAt = batch.deadlineAt
      // One offering (allow_fallbacks false, or a model with one): nothing to weigh.
      if (providers.length === 1) {
        const up = options.available(providers[0], nowMs)
        s.heldSince = up ? null : (s.heldSince ?? nowMs)
        return up ? SEND_FIRST : HOLD
      }
      const windowMs = (batch.deadlineAt - batch.createdAt) * 1000
      const targetMs = batch.deadlineAt * 1000 - options.marginShare * windowMs
      const views: OfferingView[] = providers.map((provider) => ({
        available: options.available(provider, nowMs),
        // A round of lines waiting beyond the slots: a slot that frees is taken at once from the
        // provider's own queue, not a claim later (measured: without it a spilling batch left
        // the pool's slots idle between claims, read the idle time as a lower rate, and spilled
        // 3–4% of its lines more than it needed to).
        hasRoom: (held.get(provider) ?? 0) < 2 * options.limit(provider),
        queued: s.queued.get(provider) ?? 0,
        slots: options.limit(provider),
        perSecond: meter.rate(key(batch.id, provider), nowMs).perSecond,
      }))
      const choice = chooseOffering({ nowMs, targetMs, unsent, offerings: views })
      s.heldSince = choice.kind === 'hold' ? (s.heldSince ?? nowMs) : null
      return choice
    },
    enter(batchId, provider) {
      const s = state(batchId)
      s.queued.set(provider, (s.queued.get(provider) ?? 0) + 1)
      held.set(provider, (held.get(provider) ?? 0) + 1)
    },
    started(batchId, provider, nowMs) {
      meter.started(key(batchId, provider), nowMs)
    },
    ended(batchId, provider, nowMs, serviceMs, ok) {
      meter.ended(key(batchId, provider), nowMs, serviceMs, ok)
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
      const rates = s.providers.map((p) =>
        options.available(p, nowMs) ? meter.rate(key(batchId, p), nowMs).perSecond : 0,
      )
      const finish = projectFinish(nowMs, remaining, rates)
      return finish === null ? null : Math.ceil(finish / 1000)
    },
    waiting(batchId, nowMs) {
      const s = batches.get(batchId)
      if (!s || s.providers.length === 0) return null
      const providers = s.providers.join(', ')
      // Held back unsent: every provider it may go to is out and unreachable (a pause is the
      // 429's own reason).
      if (s.heldSince !== null && s.providers.every((p) => options.unreachable(p)))
        return { code: 'provider_unavailable', providers }
      // Lines handed to available providers, none of them in service, while lines of batches due
      // no later than this one hold those providers: they wait behind them (SPEC §13). Behind a
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
