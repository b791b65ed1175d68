/** What the simulator saw, for tests and benches to assert on. */
export type FaultKind =
  | 'rate_limited'
  | 'server_error'
  | 'timeout'
  | 'reset'
  | 'malformed'
  | 'cut'
  | 'no_usage'
  | 'trickle'
  | 'concurrency_cap'
  | 'rate_cap'
  /** GPU-pool mode: refused with 503 because the waiting queue was full. */
  | 'queue_full'
  /** Flex mode: refused 429 resource_unavailable. */
  | 'flex_unavailable'

/** A snapshot: plain JSON, safe to keep after further requests. */
export interface SimStats {
  /** Every request, inference or not. */
  requests: number
  byPath: Record<string, number>
  /** Keyed by status code as a string; hanging requests have none until they end. */
  byStatus: Record<string, number>
  byFault: Partial<Record<FaultKind, number>>
  inFlight: number
  peakInFlight: number
  /** GPU-pool mode: the most requests that waited in the queue at once (0 outside the mode). */
  peakWaiting: number
  /**
   * How often each prompt arrived, keyed by a hash of the roles and texts of all messages (or
   * the embedding input). The same prompt sent through OpenAI or Anthropic shape hashes alike.
   */
  promptCounts: Record<string, number>
  /** The largest value in promptCounts (0 when empty). */
  maxPromptCount: number
  /** Arrival times (ms since the epoch) of the latest inference requests, oldest first. */
  arrivals: number[]
  /** Times (ms since the epoch) at which a 429 was answered, oldest first. */
  rateLimitedAt: number[]
}

// Bounded so a simulator left running under a bench does not grow without limit.
const ringSize = 10_000
const maxDistinctPrompts = 1_000_000

class TimeRing {
  private readonly times = new Float64Array(ringSize)
  private count = 0
  push(time: number): void {
    this.times[this.count % ringSize] = time
    this.count++
  }
  toArray(): number[] {
    const size = Math.min(this.count, ringSize)
    const start = this.count - size
    const out = new Array<number>(size)
    for (let i = 0; i < size; i++) out[i] = this.times[(start + i) % ringSize]
    return out
  }
}

/** Mutable counters behind SimStats; the server owns one. */
export class StatsRecorder {
  requests = 0
  inFlight = 0
  peakInFlight = 0
  peakWaiting = 0
  private byPath = new Map<string, number>()
  private byStatus = new Map<number, number>()
  private byFault = new Map<FaultKind, number>()
  private prompts = new Map<string, number>()
  private arrivals = new TimeRing()
  private rateLimitedAt = new TimeRing()

  arrive(path: string): void {
    this.requests++
    this.byPath.set(path, (this.byPath.get(path) ?? 0) + 1)
    this.inFlight++
    if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight
  }

  leave(): void {
    this.inFlight--
  }

  /** GPU-pool mode: the queue now holds `count` waiting requests. */
  waiting(count: number): void {
    if (count > this.peakWaiting) this.peakWaiting = count
  }

  inference(promptKey: string, now: number): void {
    this.arrivals.push(now)
    const seen = this.prompts.get(promptKey)
    if (seen !== undefined) this.prompts.set(promptKey, seen + 1)
    else if (this.prompts.size < maxDistinctPrompts) this.prompts.set(promptKey, 1)
  }

  status(status: number): void {
    this.byStatus.set(status, (this.byStatus.get(status) ?? 0) + 1)
    if (status === 429) this.rateLimitedAt.push(Date.now())
  }

  fault(kind: FaultKind): void {
    this.byFault.set(kind, (this.byFault.get(kind) ?? 0) + 1)
  }

  snapshot(): SimStats {
    let maxPromptCount = 0
    for (const count of this.prompts.values()) if (count > maxPromptCount) maxPromptCount = count
    return {
      requests: this.requests,
      byPath: Object.fromEntries(this.byPath),
      byStatus: Object.fromEntries([...this.byStatus].map(([k, v]) => [String(k), v])),
      byFault: Object.fromEntries(this.byFault),
      inFlight: this.inFlight,
      peakInFlight: this.peakInFlight,
      peakWaiting: this.peakWaiting,
      promptCounts: Object.fromEntries(this.prompts),
      maxPromptCount,
      arrivals: this.arrivals.toArray(),
      rateLimitedAt: this.rateLimitedAt.toArray(),
    }
  }

  /** Clears everything but the requests still in flight, which are real. */
  reset(): void {
    this.requests = 0
    this.peakInFlight = this.inFlight
    this.peakWaiting = 0
    this.byPath.clear()
    this.byStatus.clear()
    this.byFault.clear()
    this.prompts.clear()
    this.arrivals = new TimeRing()
    this.rateLimitedAt = new TimeRing()
  }
}
