/**
 * The usage report's figures (docs/operations.md GET /v1/usage): each answered batch line and live call is
 * added up in memory by account, UTC day, model and provider, and the sums are written to the
 * store once a second, in one transaction (never on a line's own path). A crash loses at most
 * that second of figures, not the charges, which the store wrote with the answers; `flush()`
 * before a report makes this instance's own figures exact.
 */
import { Money, moneyText, ZERO } from '../money/decimal.ts'
import { unitsText } from '../money/fixed-point.ts'
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
  /**
   * A decimal string, or units of money/fixed-point.ts (a live call's, priced in them: summed
   * as integers, with no decimal parsed on the call's path).
   */
  costUsd: string | bigint
  firstOfferingCostUsd: string | bigint
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
  /** What was added in units (live calls), beside `cost` and `first`. */
  costUnits: bigint
  firstUnits: bigint
}

const decimalOf = (cost: string | bigint) => (typeof cost === 'bigint' ? ZERO : new Money(cost))
const unitsOf = (cost: string | bigint) => (typeof cost === 'bigint' ? cost : 0n)
const total = (money: Money, units: bigint) =>
  moneyText(units === 0n ? money : money.plus(unitsText(units)))

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
    if (sums.cost !== ZERO) at.cost = at.cost.plus(sums.cost)
    if (sums.first !== ZERO) at.first = at.first.plus(sums.first)
    at.costUnits += sums.costUnits
    at.firstUnits += sums.firstUnits
  }

  async function write() {
    if (pending.size === 0) return
    const taken = pending
    pending = new Map()
    const rows = [...taken.values()].map(({ cost, first, costUnits, firstUnits, ...rest }) => ({
      ...rest,
      costUsd: total(cost, costUnits),
      firstOfferingCostUsd: total(first, firstUnits),
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
      const day = utcDay(entry.atMs)
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
        cost: decimalOf(entry.costUsd),
        first: decimalOf(entry.firstOfferingCostUsd),
        costUnits: unitsOf(entry.costUsd),
        firstUnits: unitsOf(entry.firstOfferingCostUsd),
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

const DAY_MS = 86_400_000
let dayStart = 0
let dayText = ''

/** The UTC day of `atMs` ("2026-12-01"), formatted once per day rather than once per entry. */
function utcDay(atMs: number): string {
  if (atMs < dayStart || atMs >= dayStart + DAY_MS) {
    dayStart = atMs - (atMs % DAY_MS)
    dayText = new Date(dayStart).toISOString().slice(0, 10)
  }
  return dayText
}
