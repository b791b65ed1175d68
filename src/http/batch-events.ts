/**
 * A batch's progress stream (docs/events-and-webhooks.md), as server-sent events: `event: batch` with the batch
 * object whenever its counts, cost, status or `waiting` change, at most one a second; a comment
 * every keep-alive interval (15 s), so proxies keep the connection open; the stream ends after
 * the event of an ended status.
 *
 * `id:` is the batch row's version (one more on every change of the row, on any instance), so a
 * stream resumed with `Last-Event-ID: N` sends the current state only once the row has moved
 * past version N: never an older state, never the same one twice, and the ended state whenever
 * the client has not seen it. A resume at the ended state's own id has nothing left to send:
 * 204, which tells an EventSource to stop reconnecting. An id above the batch's version is none
 * of this batch's (another batch's, or a store restored from a backup): the stream starts over,
 * current state first (docs/structured-outputs.md).
 *
 * The store is the source of truth: the batch is re-read on a change signal (batch-changes.ts)
 * and on a slow timer. A stream holds one rendered batch and one timer, and stops at once when
 * the client goes away.
 */
import { isOpenBatch, type BatchRecord } from '../domain.ts'
import type { BatchChanges } from '../coordination/batch-changes.ts'

/** docs/events-and-webhooks.md: at most one event a second. */
export const MIN_EVENT_GAP_MS = 1_000

export interface EventStreamOptions {
  /** Reads the batch from the store; null once it is gone. */
  read: () => Promise<BatchRecord | null>
  /** The batch object as GET /v1/batches/{id} renders it (with what else it reads). */
  render: (batch: BatchRecord) => Promise<Record<string, unknown>>
  changes: BatchChanges
  /** A comment goes out this often (SPEC: every 15 s). */
  keepAliveMs: number
  /** The batch is re-read this often without a signal (changes no signal announces). */
  pollMs: number
  /**
   * Aborted when the stream's key was revoked or the instance stops (stream-slots.ts): the stream
   * ends at once, its last line the abort's reason.
   */
  signal?: AbortSignal
  /** Called once when the stream has ended, however it ended (its slot is given back). */
  onEnd?: () => void
}

/** Writes queued unread (an event a second, a comment every 15 s) before a stalled client is dropped. */
const MAX_UNREAD_WRITES = 120

const encoder = new TextEncoder()

/** The fields whose change makes an event (docs/events-and-webhooks.md), as one comparable text. */
function progressOf(rendered: Record<string, unknown>): string {
  return JSON.stringify([
    rendered.request_counts,
    rendered.cost_usd,
    rendered.status,
    rendered.waiting ?? null,
  ])
}

/** The id a client resumes from: a whole number, or null (a missing or foreign id starts over). */
export function parseLastEventId(header: string | null): number | null {
  if (header === null || !/^\d{1,15}$/.test(header.trim())) return null
  return Number(header.trim())
}

/**
 * Whether a stream opened with `lastEventId` on `batch` has anything to send: false only for a
 * client that has already seen this batch's ended state (answer 204 then).
 */
export function hasNews(batch: BatchRecord, lastEventId: number | null): boolean {
  return lastEventId === null || isOpenBatch(batch.status) || batch.version > lastEventId
}

export function batchEventStream(
  first: BatchRecord,
  lastEventId: number | null,
  options: EventStreamOptions,
): ReadableStream<Uint8Array> {
  let closed = false
  let wakeUp: (() => void) | null = null
  let signalled = false
  const wake = () => {
    signalled = true
    wakeUp?.()
  }
  let unwatch = () => {}
  let unlisten = () => {}
  let timer: ReturnType<typeof setTimeout> | null = null
  const end = () => {
    if (closed) return
    closed = true
    unwatch()
    unlisten()
    if (timer) clearTimeout(timer)
    wakeUp?.()
    options.onEnd?.()
  }

  /** Sleeps until a change signal, `ms`, or the end of the stream. */
  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (signalled || closed) return resolve()
      wakeUp = resolve
      timer = setTimeout(resolve, Math.max(0, ms))
    }).then(() => {
      wakeUp = null
      if (timer) clearTimeout(timer)
      timer = null
    })

  return new ReadableStream<Uint8Array>({
    start(controller) {
      // A revoked key, or the instance stopping: the stream ends now, not at its next event
      // (docs/webhooks-and-streams.md: within 2 s), its last line saying which.
      const revoked = () => {
        if (closed) return
        const why = (options.signal?.reason as Error | undefined)?.message ?? 'the key was revoked'
        try {
          controller.enqueue(encoder.encode(`: ${why}\n\n`))
        } catch {}
        end()
        try {
          controller.close()
        } catch {}
      }
      if (options.signal?.aborted) {
        revoked()
        return
      }
      options.signal?.addEventListener('abort', revoked)
      unlisten = () => options.signal?.removeEventListener('abort', revoked)
      unwatch = options.changes.watch(first.id, wake)
      const write = (text: string) => {
        if (closed) return
        // A client that reads nothing while events pile up is let go instead of held in memory.
        if ((controller.desiredSize ?? 0) < -MAX_UNREAD_WRITES) {
          end()
          return controller.error(new Error('the client stopped reading its progress stream'))
        }
        try {
          controller.enqueue(encoder.encode(text))
        } catch {
          end()
        }
      }
      const run = async () => {
        // What the client has: a version (after a resume) and, once sent here, the progress.
        let seenVersion = lastEventId
        let seenProgress: string | null = null
        let lastEventAt = 0
        // Comments go out on their own clock, events or not (SPEC: one every 15 s).
        let lastCommentAt = Date.now()
        let nextReadAt = 0
        let batch: BatchRecord | null = first
        if (lastEventId !== null) write(': resumed\n\n')
        while (!closed) {
          if (batch === null) break
          const rendered = await options.render(batch)
          const progress = progressOf(rendered)
          const news =
            seenProgress === null
              ? seenVersion === null || batch.version > seenVersion
              : progress !== seenProgress
          const ended = !isOpenBatch(batch.status)
          const now = Date.now()
          let heldBack = news
          if (news && now - lastEventAt >= MIN_EVENT_GAP_MS) {
            heldBack = false
            write(`id: ${batch.version}\nevent: batch\ndata: ${JSON.stringify(rendered)}\n\n`)
            seenVersion = batch.version
            seenProgress = progress
            lastEventAt = now
            if (ended) break
          } else if (!news && ended && seenProgress === null) {
            // Resumed at the ended state itself: nothing left (the route answers 204 first).
            break
          }
          // Next wake-up: a held-back event's turn, the keep-alive, or the slow poll.
          const heldBackUntil = heldBack ? lastEventAt + MIN_EVENT_GAP_MS : Infinity
          nextReadAt = Math.min(heldBackUntil, Date.now() + options.pollMs)
          for (;;) {
            const keepAliveAt = lastCommentAt + options.keepAliveMs
            await sleep(Math.min(nextReadAt, keepAliveAt) - Date.now())
            if (closed) break
            const now = Date.now()
            if (now >= keepAliveAt) {
              write(': keep-alive\n\n')
              lastCommentAt = now
            }
            // A signal inside the one-second gap only brings the held-back read forward to it.
            if (signalled && now < lastEventAt + MIN_EVENT_GAP_MS) {
              signalled = false
              nextReadAt = Math.min(nextReadAt, lastEventAt + MIN_EVENT_GAP_MS)
              continue
            }
            if (signalled || now >= nextReadAt) break
          }
          if (closed) break
          signalled = false
          batch = await options.read()
        }
        if (!closed) {
          end()
          controller.close()
        }
      }
      run().catch(() => {
        // A store error ends the stream; the client resumes from its last id.
        if (!closed) {
          end()
          controller.error(new Error('the progress stream broke off'))
        }
      })
    },
    cancel() {
      end()
    },
  })
}
