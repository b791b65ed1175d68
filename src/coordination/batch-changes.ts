/**
 * Batch changes: "these batches' rows may have changed", so progress streams (docs/events-and-webhooks.md) re-read
 * them now instead of at their next slow poll. In one process (SQLite) a change is a function
 * call; on PostgreSQL it also goes on the store's channel (NOTIFY), so a stream served by one
 * instance hears of the lines another instance dispatches. A signal carries no state: the
 * store stays the source of truth, and a signal lost while the database restarts costs a poll.
 */
import type { StoreChannel } from '../store/store-channel.ts'
import type { Logger } from '../telemetry/logger.ts'

/** The store channel batch changes go on (open-store.ts openStoreChannel). */
export const BATCH_CHANGES_CHANNEL = 'multigrid_batches'

/**
 * Changes of one instance are sent to the others at most this often, ids grouped into one
 * NOTIFY: a busy batch records outcomes many times a second, and a stream sends at most one
 * event a second anyway.
 */
const FLUSH_MS = 200
/** PostgreSQL's NOTIFY payload is at most 8,000 bytes; ids are ~34 characters. */
const PAYLOAD_BYTES = 7_000

export interface BatchChanges {
  /** Wakes this instance's watchers of these batches at once, other instances' within 200 ms. */
  publish(batchIds: Iterable<string>): void
  /** Calls `onChange` whenever `batchId` may have changed, until the returned function is called. */
  watch(batchId: string, onChange: () => void): () => void
  /** How many watchers this instance has (streams open here), for tests and metrics. */
  watching(): number
  close(): Promise<void>
}

/** Batch changes on the store's channel when it has one (PostgreSQL), else in process. */
export async function openBatchChanges(
  channel: StoreChannel | null,
  instance: string,
  logger: Logger,
): Promise<BatchChanges> {
  const watchers = new Map<string, Set<() => void>>()
  let count = 0
  const wake = (id: string) => {
    for (const onChange of watchers.get(id) ?? []) onChange()
  }

  // Ids waiting to go to the other instances, sent together every FLUSH_MS.
  const unsent = new Set<string>()
  let timer: ReturnType<typeof setTimeout> | null = null
  const prefix = `${instance}|`
  function flush() {
    timer = null
    if (!channel) return
    let payload = prefix
    const send = (text: string) =>
      channel.send(text).catch((error) => {
        logger.debug('batch_changes.notify_failed', { reason: (error as Error).message })
      })
    for (const id of unsent) {
      if (payload.length + id.length + 1 > PAYLOAD_BYTES) {
        void send(payload)
        payload = prefix
      }
      payload += payload === prefix ? id : `,${id}`
    }
    unsent.clear()
    if (payload !== prefix) void send(payload)
  }

  if (channel) {
    await channel.listen((payload) => {
      const bar = payload.indexOf('|')
      // Our own changes woke our watchers when they were published.
      if (bar < 0 || payload.slice(0, bar) === instance) return
      for (const id of payload.slice(bar + 1).split(',')) if (id) wake(id)
    })
  }

  return {
    publish(batchIds) {
      for (const id of batchIds) {
        wake(id)
        if (channel) unsent.add(id)
      }
      if (channel && unsent.size > 0 && timer === null) {
        timer = setTimeout(flush, FLUSH_MS)
        timer.unref?.()
      }
    },
    watch(batchId, onChange) {
      let set = watchers.get(batchId)
      if (!set) watchers.set(batchId, (set = new Set()))
      set.add(onChange)
      count++
      let watching = true
      return () => {
        if (!watching) return
        watching = false
        count--
        set.delete(onChange)
        if (set.size === 0) watchers.delete(batchId)
      }
    },
    watching: () => count,
    async close() {
      if (timer) clearTimeout(timer)
      flush()
      await channel?.close()
    },
  }
}
