/**
 * The HTTP answer of a progress stream (batch-events.ts), shared by the API and the dashboard:
 * `text/event-stream` from the batch as first read, resumed from `Last-Event-ID`, or 204 when
 * the client has already seen the batch's ended state; each stream holds one of its key's slots
 * (stream-slots.ts) while it is open.
 */
import type { BatchChanges } from '../coordination/batch-changes.ts'
import type { BatchRecord } from '../domain.ts'
import type { StreamCheck, StreamSlots } from './stream-slots.ts'
import {
  batchEventStream,
  hasNews,
  parseLastEventId,
  type EventStreamOptions,
} from './batch-events.ts'

/** What every stream of an instance shares: the change signals, the timing and the slots. */
export interface EventStreamSettings {
  changes: BatchChanges
  keepAliveMs: number
  pollMs: number
  /** Open streams per key (docs/webhooks-and-streams.md), ended at the key's revocation. */
  slots: StreamSlots
}

/** The part of Bun's server a stream needs: its idle timeout, per request. */
interface IdleTimeouts {
  timeout(request: Request, seconds: number): void
}

export async function eventStreamResponse(
  request: Request,
  server: IdleTimeouts | null,
  batch: BatchRecord,
  options: EventStreamSettings &
    Pick<EventStreamOptions, 'read' | 'render'> & {
      headers: Record<string, string>
      /** Whose slot the stream takes. */
      keyId: string
      /** What the stream depends on (its key, or its dashboard session); invalid ends it. */
      check: StreamCheck
    },
): Promise<Response> {
  // EventSource sends the header when it reconnects; a first connection can only name its
  // starting point in the URL (the dashboard's page does: the version it was rendered at).
  const asked = parseLastEventId(
    request.headers.get('last-event-id') ?? new URL(request.url).searchParams.get('last_event_id'),
  )
  // Above the batch's version: not an id this batch gave, so start over (docs/webhooks-and-streams.md); holding
  // back every event until the version passed it would hide the ended state itself.
  const lastEventId = asked !== null && asked > batch.version ? null : asked
  if (!hasNews(batch, lastEventId)) {
    return new Response(null, { status: 204, headers: { ...options.headers } })
  }
  // Only a stream takes a slot: the 204 above is an answer like any other. Past the key's
  // limit this throws the 429.
  const slot = await options.slots.open(options.keyId, options.check)
  // Bun closes a connection idle for 10 s, and a stream is quiet for up to 15 s. A finite
  // timeout here is not safe: on a kept-alive connection reused for the stream, Bun 1.4.5 cut it
  // when the timeout ran out although comments were written meanwhile. A peer that went away is
  // noticed when a write fails (the keep-alive comment at the latest), and the stream ends then.
  server?.timeout(request, 0)
  const stream = batchEventStream(batch, lastEventId, {
    read: options.read,
    render: options.render,
    changes: options.changes,
    keepAliveMs: options.keepAliveMs,
    pollMs: options.pollMs,
    signal: slot.signal,
    onEnd: slot.release,
  })
  return new Response(stream, {
    headers: {
      ...options.headers,
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      // Proxies such as nginx otherwise hold the events back in their buffers.
      'x-accel-buffering': 'no',
    },
  })
}
