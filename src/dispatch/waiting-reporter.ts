/**
 * Tells the store why a batch waits, for what this instance sees while dispatching (docs/routing.md):
 * a provider that answered 429 and is paused, a provider whose every replica is failing. The
 * store keeps it with the batch, so every instance serves it; this instance clears what it set
 * once the batch's lines move again. Writes only when what it would say changes.
 * (`max_cost_reached` is the store's own, set where lines are claimed under the cap.)
 */
import type { BatchWaiting, WaitingCode } from '../domain.ts'
import { excerpt } from '../excerpt.ts'
import type { DispatchStore } from '../store/store.ts'
import type { Logger } from '../telemetry/logger.ts'

/** The codes this reporter sets and clears; another part's code is left as it is. */
const OURS: readonly WaitingCode[] = [
  'provider_rate_limited',
  'provider_unavailable',
  'capacity_busy',
]

export interface WaitingReporter {
  /** `provider` answered 429 for a line of the batch; nothing goes to it before `untilMs`. */
  rateLimited(batchId: string, provider: string, untilMs: number): void
  /**
   * `provider` answered a line of the batch 429 busy (a flex lane out of capacity): sent again at
   * `untilMs`. Said only while none of the batch's lines ended here lately (lines that move are
   * no reason to wait), and cleared by the next that does.
   */
  busy(batchId: string, provider: string, untilMs: number): void
  /** Every replica of `provider` is failing; the batch's lines for it wait. */
  unavailable(batchId: string, provider: string): void
  /**
   * A batch lane (`lane`: "openai:batch") refused a provider batch of the batch's lines whole;
   * they go to it again at `retryAtMs`, and to the live offerings from `fallbackAtMs`. The next
   * line of the batch that ends anywhere clears it.
   */
  laneRefused(batchId: string, lane: string, refusal: LaneRefusal): void
  /**
   * Lines of the batch keep to batch lane `lane` (provider.allow_fallbacks false), which takes no
   * lines after `closedAtMs`: they wait for the deadline, which ends them expired. Said until then,
   * whatever other lines of the batch do meanwhile.
   */
  laneClosed(batchId: string, lane: string, when: { closedAtMs: number; deadlineMs: number }): void
  /**
   * The batch's lines wait for a slot of `providers` (its allowed ones, by the planner), full
   * with other batches' lines.
   */
  capacityBusy(batchId: string, providers: string): void
  /** The batch no longer waits for capacity: clears that reason, and no other this instance gave. */
  capacityFreed(batchId: string): void
  /**
   * A line of the batch ended on `provider` (null: without reaching one): it moves, unless that
   * is the provider still paused.
   */
  progressed(batchId: string, provider: string | null): void
}

/** Batches whose reason this instance remembers, to clear it later. */
const MAX_REMEMBERED = 10_000
/** A batch one of whose lines ended here this recently is moving, whatever is busy. */
const MOVING_MS = 5_000

/** "12:04:10 UTC" */
const clock = (ms: number) => `${new Date(ms).toISOString().slice(11, 19)} UTC`

export function rateLimitedWaiting(provider: string, untilMs: number): BatchWaiting {
  const until = Math.ceil(untilMs / 1000)
  return {
    code: 'provider_rate_limited',
    message: `${provider} answered 429; dispatch resumes at ${clock(until * 1000)}. Nothing to do: do not resubmit.`,
    until,
  }
}

export function unavailableWaiting(provider: string): BatchWaiting {
  return {
    code: 'provider_unavailable',
    message:
      `${provider} is unavailable: every replica is failing. Its lines are tried again as it ` +
      'comes back, or go to another offering they allow. Nothing to do: do not resubmit; if it ' +
      "stays down, tell the gateway's operator.",
  }
}

/** Why a batch lane's provider batch failed whole, and when its lines are next sent. */
export interface LaneRefusal {
  reason: string
  retryAtMs: number
  /** When the live lanes take the lines: the lane's close, deadline − max(min_hours_left, fallback_hours). */
  fallbackAtMs: number
}

/** "2026-12-06 14:00:00 UTC" */
const moment = (ms: number) => `${new Date(ms).toISOString().slice(0, 19).replace('T', ' ')} UTC`

export function laneRefusedWaiting(lane: string, refusal: LaneRefusal): BatchWaiting {
  const { reason, retryAtMs, fallbackAtMs } = refusal
  const until = Math.ceil(retryAtMs / 1000)
  const next =
    retryAtMs < fallbackAtMs
      ? `They go to it again at ${moment(until * 1000)}, and run on the live offerings from ${moment(fallbackAtMs)} if it keeps refusing them.`
      : `They run on the live offerings from ${moment(fallbackAtMs)}.`
  return {
    code: 'provider_unavailable',
    message: `${lane} refused this batch's lines (${excerpt(reason, 200)}). ${next} Nothing to do: do not resubmit.`,
    until,
  }
}

export function laneClosedWaiting(
  batchId: string,
  lane: string,
  when: { closedAtMs: number; deadlineMs: number },
): BatchWaiting {
  const until = Math.ceil(when.deadlineMs / 1000)
  return {
    code: 'provider_unavailable',
    message:
      `Lines of this batch keep to ${lane} (provider.allow_fallbacks false), which took no lines ` +
      `after ${moment(when.closedAtMs)}; no other offering may run them, so they end expired at ` +
      `${moment(until * 1000)}. To run them sooner, cancel the batch and submit its unfinished ` +
      `lines again (GET /v1/batches/${batchId}/results?filter=failed&format=input) after ` +
      'setting provider.allow_fallbacks to true in each.',
    until,
  }
}

export function capacityBusyWaiting(providers: string): BatchWaiting {
  return {
    code: 'capacity_busy',
    message:
      `${providers} ${providers.includes(',') ? 'are' : 'is'} full with other batches' lines due ` +
      "earlier; this batch's lines wait their turn and run as slots free. Nothing to do: do not resubmit.",
  }
}

export function createWaitingReporter(
  store: Pick<DispatchStore, 'setWaiting'>,
  logger: Logger,
  now: () => number = Date.now,
): WaitingReporter {
  /**
   * What this instance last wrote per batch, and until when it holds (0: until progress); a
   * `sticky` reason holds until then whatever ends meanwhile.
   */
  const said = new Map<
    string,
    { waiting: BatchWaiting; provider: string; untilMs: number; sticky?: boolean }
  >()
  /**
   * Per batch, every provider paused on its 429 and until when: the message names one (the
   * latest to resume), but a line that ends on any of them (given up after its attempts) is the
   * pause's doing, not progress, and leaves the reason as it is.
   */
  const paused = new Map<string, Map<string, number>>()
  /** Per batch, when a line of it last ended here (for `busy`). */
  const moved = new Map<string, number>()

  const write = (batchId: string, waiting: BatchWaiting | null, replaces: readonly WaitingCode[]) =>
    store
      .setWaiting(batchId, waiting, replaces)
      .catch((error: Error) =>
        logger.warn('dispatch.waiting_failed', { batch_id: batchId, reason: error.message }),
      )

  const say = (
    batchId: string,
    provider: string,
    waiting: BatchWaiting,
    { untilMs, sticky = false }: { untilMs: number; sticky?: boolean },
  ) => {
    const before = said.get(batchId)
    if (before && before.waiting.message === waiting.message) return
    // Lines that will expire unsent outweigh any wait of the others: said again by nobody.
    if (before?.sticky && !sticky && now() < before.untilMs) return
    // Bounded: the oldest entries (batches long gone, most likely) are forgotten first.
    if (said.size >= MAX_REMEMBERED) said.delete(said.keys().next().value!)
    said.delete(batchId)
    said.set(batchId, { waiting, provider, untilMs, sticky })
    void write(batchId, waiting, OURS)
  }

  return {
    rateLimited(batchId, provider, untilMs) {
      let pauses = paused.get(batchId)
      if (!pauses) {
        if (paused.size >= MAX_REMEMBERED) paused.delete(paused.keys().next().value!)
        paused.set(batchId, (pauses = new Map()))
      }
      pauses.set(provider, Math.max(untilMs, pauses.get(provider) ?? 0))
      const before = said.get(batchId)
      // A later pause of the same provider moves the resume time on; an earlier one says nothing new.
      if (before?.waiting.code === 'provider_rate_limited' && before.untilMs >= untilMs) return
      say(batchId, provider, rateLimitedWaiting(provider, untilMs), { untilMs })
    },
    busy(batchId, provider, untilMs) {
      if (now() - (moved.get(batchId) ?? -Infinity) < MOVING_MS) return
      const before = said.get(batchId)
      if (before?.waiting.code === 'provider_unavailable') return
      // A pause stands until its own time; a busy answer said before is moved on once the time
      // it gave has gone by, so the batch never shows a resume time in the past.
      if (
        before?.waiting.code === 'provider_rate_limited' &&
        (before.untilMs > now() || (before.waiting.until ?? 0) * 1000 > now())
      )
        return
      // Not a pause: the next line that ends, here or anywhere, clears it.
      say(batchId, provider, rateLimitedWaiting(provider, untilMs), { untilMs: 0 })
    },
    unavailable(batchId, provider) {
      if (said.get(batchId)?.waiting.code === 'provider_rate_limited') return
      say(batchId, provider, unavailableWaiting(provider), { untilMs: 0 })
    },
    laneRefused(batchId, lane, refusal) {
      if (said.get(batchId)?.waiting.code === 'provider_rate_limited') return
      say(batchId, lane, laneRefusedWaiting(lane, refusal), { untilMs: 0 })
    },
    laneClosed(batchId, lane, when) {
      if (said.get(batchId)?.waiting.code === 'provider_rate_limited') return
      say(batchId, lane, laneClosedWaiting(batchId, lane, when), {
        untilMs: when.deadlineMs,
        sticky: true,
      })
    },
    capacityBusy(batchId, providers) {
      const before = said.get(batchId)?.waiting.code
      if (before === 'provider_rate_limited' || before === 'provider_unavailable') return
      say(batchId, providers, capacityBusyWaiting(providers), { untilMs: 0 })
    },
    capacityFreed(batchId) {
      if (said.get(batchId)?.waiting.code !== 'capacity_busy') return
      said.delete(batchId)
      void write(batchId, null, ['capacity_busy'])
    },
    progressed(batchId, provider) {
      if (moved.size >= MAX_REMEMBERED && !moved.has(batchId))
        moved.delete(moved.keys().next().value!)
      moved.set(batchId, now())
      const before = said.get(batchId)
      if (!before) return
      if ((before.sticky || provider === before.provider) && now() < before.untilMs) return
      if (provider !== null && now() < (paused.get(batchId)?.get(provider) ?? 0)) return
      said.delete(batchId)
      paused.delete(batchId)
      void write(batchId, null, [before.waiting.code])
    },
  }
}
