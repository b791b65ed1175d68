/**
 * Collects line outcomes and records them in batches: one store transaction per few milliseconds
 * instead of one per line. The changes in calls in flight per provider (routing.providers) ride
 * along with them. If the store is unreachable the outcomes stay here, leased, and are
 * written when it is back; the heartbeat keeps their leases alive meanwhile.
 */
import type { Logger } from '../telemetry/logger.ts'
import type { CallsChange, DispatchStore, LineOutcome } from '../store/store.ts'

export interface Recorder {
  add(outcome: LineOutcome): void
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

export function createRecorder(
  store: DispatchStore,
  owner: string,
  logger: Logger,
  onRecorded: (n: number) => void = () => {},
): Recorder {
  let buffer: LineOutcome[] = []
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
      try {
        await store.recordOutcomes(owner, chunk, Date.now(), written)
        buffer = buffer.slice(chunk.length)
        onRecorded(chunk.length)
        if (failing) logger.info('recorder.store_recovered')
        failing = false
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
      }
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
    add(outcome) {
      buffer.push(outcome)
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
