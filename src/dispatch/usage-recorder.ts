/**
 * The usage report's figures (docs/operations.md GET /v1/usage): each answered batch line and live call is
 * added up in memory by account, UTC day, model and provider, and the sums are written to the
 * store once a second, in one transaction (never on a line's own path). A crash loses at most
 * that second of figures, not the charges, which the store wrote with the answers; `flush()`
 * before a report makes this instance's own figures exact.
 */
import { Money, moneyText } from '../money/decimal.ts'
import type { Logger } from '../telemetry/logger.ts'
import type { UsageAddition, UsageStore } from '../store/store.ts'

/** One answered line or live call. */
export interface UsageEntry {
  accountId: string
  kind: 'line' | 'live'
  model: string
  provider: string
  inputTokens: number
  cachedInputTokens: number
  outputTokens: number
  costUsd: string
  firstOfferingCostUsd: string
  /** Unix ms of the answer: its UTC day is the row's. */
  atMs: number
}

export interface UsageRecorder {
  add(entry: UsageEntry): void
  /** Writes what is buffered; what a failed write held is kept for the next. */
  flush(): Promise<void>
  start(): void
  stop(): Promise<void>
}

interface Sums extends Omit<UsageAddition, 'costUsd' | 'firstOfferingCostUsd'> {
  cost: Money
  first: Money
}

export function createUsageRecorder(
  store: UsageStore,
  options: { everyMs: number; logger: Logger },
): UsageRecorder {
  let pending = new Map<string, Sums>()
  let timer: ReturnType<typeof setInterval> | null = null
  let writing: Promise<void> = Promise.resolve()

  const merge = (into: Map<string, Sums>, key: string, sums: Sums) => {
    const at = into.get(key)
    if (!at) return into.set(key, sums)
    at.lines += sums.lines
    at.liveCalls += sums.liveCalls
    at.inputTokens += sums.inputTokens
    at.cachedInputTokens += sums.cachedInputTokens
    at.outputTokens += sums.outputTokens
    at.cost = at.cost.plus(sums.cost)
    at.first = at.first.plus(sums.first)
  }

  async function write() {
    if (pending.size === 0) return
    const taken = pending
    pending = new Map()
    const rows = [...taken.values()].map(({ cost, first, ...rest }) => ({
      ...rest,
      costUsd: moneyText(cost),
      firstOfferingCostUsd: moneyText(first),
    }))
    try {
      await store.addUsage(rows)
    } catch (error) {
      for (const [key, sums] of taken) merge(pending, key, sums)
      options.logger.warn('usage.write_failed', { rows: rows.length, reason: String(error) })
    }
  }

  return {
    add(entry) {
      const day = new Date(entry.atMs).toISOString().slice(0, 10)
      const key = `${entry.accountId}\u0000${day}\u0000${entry.model}\u0000${entry.provider}`
      merge(pending, key, {
        accountId: entry.accountId,
        day,
        model: entry.model,
        provider: entry.provider,
        lines: entry.kind === 'line' ? 1 : 0,
        liveCalls: entry.kind === 'live' ? 1 : 0,
        inputTokens: entry.inputTokens,
        cachedInputTokens: entry.cachedInputTokens,
        outputTokens: entry.outputTokens,
        cost: new Money(entry.costUsd),
        first: new Money(entry.firstOfferingCostUsd),
      })
    },
    // One write at a time: a report's flush waits for the timer's write under way.
    flush() {
      writing = writing.then(write)
      return writing
    },
    start() {
      timer ??= setInterval(() => void this.flush(), options.everyMs)
    },
    async stop() {
      if (timer) clearInterval(timer)
      timer = null
      await this.flush()
    },
  }
}
