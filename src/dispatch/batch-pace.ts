/**
 * How fast a batch's lines actually finish here (docs/routing.md routing.eta): completions counted per
 * batch over a recent stretch of time. The planner's own
 * rates (throughput-meter.ts) say what each offering could do and steer spills; the ETA follows
 * what happens: against a provider paced by 429s those rates read a pool idle half of each second
 * as zero (paused) or as twice its pace (ETA null for most of a 300-line run, then 11 s early
 * with 12 s left), while the count of completions over time is the pace itself.
 */

/** How far back the pace looks: long enough to hold many answers, short enough to follow a change. */
const WINDOW_MS = 30_000
/**
 * Answers that arrive together (a pool's first wave, a second's allowance after a 429) mark where
 * the count starts and are not counted themselves: counted, the first wave of 64 lines at 2 s
 * read as twice the pace for the next waves.
 */
const CLUMP_MS = 250
/** No answer for this long: the pace falls with the time since the last one (a stall shows). */
const STALL_MS = 10_000
/** Completions kept per batch (more than a window's worth is never needed). */
const KEPT = 8_192

interface Pace {
  startedAt: number
  /** Unix ms of the latest completions, oldest first. */
  done: number[]
}

export class BatchPace {
  private readonly paces = new Map<string, Pace>()

  /** A line of the batch started here (the first one starts its clock). */
  started(batchId: string, nowMs: number): void {
    if (!this.paces.has(batchId)) this.paces.set(batchId, { startedAt: nowMs, done: [] })
  }

  /** A line of the batch reached a final state here. */
  completed(batchId: string, nowMs: number): void {
    const pace = this.paces.get(batchId)
    if (!pace) return
    pace.done.push(nowMs)
    if (pace.done.length > KEPT) pace.done.splice(0, pace.done.length - KEPT)
  }

  /**
   * Lines per second lately: the answers after the window's first ones over the time they took;
   * null before there is a stretch to measure.
   */
  rate(batchId: string, nowMs: number): number | null {
    const done = this.paces.get(batchId)?.done
    if (!done || done.length === 0) return null
    let first = done.length - 1
    while (first > 0 && done[first - 1] >= nowMs - WINDOW_MS) first--
    const anchor = done[first] + CLUMP_MS
    let count = 0
    for (let i = done.length - 1; i >= first && done[i] > anchor; i--) count++
    if (count === 0) return null
    // To the latest answer the gaps between waves read as nothing, to now as slowness: halfway
    // between the two, unless it stalled.
    const last = done[done.length - 1]
    const span = nowMs - last > STALL_MS ? nowMs - anchor : (last - anchor + (nowMs - anchor)) / 2
    return span > 0 ? (count * 1000) / span : null
  }

  forget(batchId: string): void {
    this.paces.delete(batchId)
  }
}
