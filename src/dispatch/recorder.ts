/**
 * Collects line outcomes and records them in batches: one store transaction per few milliseconds
 * instead of one per line. The changes in calls in flight per provider (routing.providers) ride
 * along with them. If the store is unreachable the outcomes stay here, leased, and are
 * written when it is back; the heartbeat keeps their leases alive meanwhile.
 */
import type { Logger } from '../telemetry/logger.ts'
import type { CallsChange, ClaimedLine, DispatchStore, LineOutcome } from '../store/store.ts'

export interface Recorder {
  /** An outcome to write; with its line, the `charged` hook hears of it once it is recorded. */
  add(outcome: LineOutcome, line?: ClaimedLine): void
  /** A call to `provider` for a line of the batch started (+1) or ended (−1); written with the next outcomes. */
  call(batchId: string, provider: string, delta: 1 | -1): void
  /** Writes everything buffered; resolves once it is stored (retrying while the store is down). */
  flush(): Promise<void>
  /** Starts the next write now instead of at the end of the flush interval (if none is under way). */
  flushSoon(): void
  readonly pending: number
}

const MAX_BATCH = 500
// Each write is a store round trip (a message to the SQLite thread, a PostgreSQL transaction);
// 20 ms keeps them to about 50 a second whatever the rate.
const FLUSH_MS = 20
const RETRY_MS = 500

export interface RecorderHooks {
  /** A write ended: `n` outcomes were written (recorded, or dropped as no longer this owner's). */
  written?(n: number): void
  /**
   * An outcome added with its line was recorded, its line charged `chargedUsd` (its cost, or less
   * where the balance ran out): what usage and metrics count, once, by the instance that billed it.
   */
  charged?(outcome: LineOutcome, line: ClaimedLine, chargedUsd: string): void
}

export function createRecorder(
  store: DispatchStore,
  owner: string,
  logger: Logger,
  hooks: RecorderHooks = {},
): Recorder {
  let buffer: LineOutcome[] = []
  /** The line of each outcome in `buffer`, where it was added with one. */
  let lines: (ClaimedLine | undefined)[] = []
  /** Net change of calls in flight per batch and provider since the last write. */
  let calls = new Map<string, Map<string, number>>()
  let timer: ReturnType<typeof setTimeout> | null = null
  let writing: Promise<void> | null = null
  let failing = false

  const write = async () => {
    while (buffer.length > 0 || calls.size > 0) {
      const chunk = buffer.slice(0, MAX_BATCH)
      const changes = calls
      calls = new Map()
      const written: CallsChange[] = []
      for (const [batchId, byProvider] of changes)
        for (const [provider, delta] of byProvider)
          if (delta !== 0) written.push({ batchId, provider, delta })
      let charged: (string | null)[]
      try {
        charged = (await store.recordOutcomes(owner, chunk, Date.now(), written)).charged
      } catch (error) {
        // Kept for the next try, with whatever changed meanwhile.
        for (const { batchId, provider, delta } of written) addCall(batchId, provider, delta)
        if (!failing)
          logger.warn('recorder.store_unavailable', {
            reason: (error as Error).message,
            buffered: buffer.length,
          })
        failing = true
        await Bun.sleep(RETRY_MS)
        continue
      }
      const chunkLines = lines.slice(0, chunk.length)
      buffer = buffer.slice(chunk.length)
      lines = lines.slice(chunk.length)
      if (failing) logger.info('recorder.store_recovered')
      failing = false
      // Counting must not stop recording: a fault in it is logged, not thrown into the write loop.
      try {
        if (hooks.charged) tellCharged(hooks.charged, chunk, chunkLines, charged)
      } catch (error) {
        logger.error('recorder.count_failed', { reason: String(error) })
      }
      hooks.written?.(chunk.length)
    }
  }

  // By batch, then provider: twice a line, a key string built and hashed each time cost more.
  function addCall(batchId: string, provider: string, delta: number) {
    let byProvider = calls.get(batchId)
    if (!byProvider) calls.set(batchId, (byProvider = new Map()))
    byProvider.set(provider, (byProvider.get(provider) ?? 0) + delta)
  }

  const start = () => {
    timer = null
    if (!writing) {
      writing = write().finally(() => {
        writing = null
        if (buffer.length > 0 || calls.size > 0) schedule()
      })
    }
    return writing
  }
  const schedule = () => {
    if (!timer && !writing) timer = setTimeout(start, buffer.length >= MAX_BATCH ? 0 : FLUSH_MS)
  }

  return {
    add(outcome, line) {
      buffer.push(outcome)
      lines.push(line)
      schedule()
    },
    call(batchId, provider, delta) {
      addCall(batchId, provider, delta)
      schedule()
    },
    async flush() {
      if (timer) clearTimeout(timer)
      timer = null
      while (buffer.length > 0 || calls.size > 0 || writing) await (writing ?? start())
    },
    flushSoon() {
      if (timer) clearTimeout(timer)
      timer = null
      if (buffer.length > 0 || calls.size > 0) start()
    },
    get pending() {
      return buffer.length
    },
  }
}

function tellCharged(
  charged: NonNullable<RecorderHooks['charged']>,
  outcomes: readonly LineOutcome[],
  lines: readonly (ClaimedLine | undefined)[],
  amounts: readonly (string | null)[],
) {
  outcomes.forEach((outcome, i) => {
    const line = lines[i]
    const usd = amounts[i]
    if (line && usd !== null && usd !== undefined) charged(outcome, line, usd)
  })
}
