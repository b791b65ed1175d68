/** Building responses, including the broken ones the fault modes need. */
import { encodeUtf8 } from './reply.ts'

export type Dialect = 'openai' | 'anthropic'

const jsonHeaders = { 'content-type': 'application/json' }
const sseHeaders = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }

export function jsonResponse(body: unknown, status = 200, headers: Record<string, string> = {}) {
  return new Response(JSON.stringify(body), { status, headers: { ...jsonHeaders, ...headers } })
}

/** A body ready to send: its text and whether it is JSON or server-sent events. */
export interface Payload {
  text: string
  sse: boolean
}

/** A 200 with the body; the answer every request gets when no fault is drawn, so kept lean. */
export function payloadResponse(payload: Payload, requestId: string): Response {
  const headers = { ...(payload.sse ? sseHeaders : jsonHeaders), 'x-request-id': requestId }
  return new Response(payload.text, { status: 200, headers })
}

/** What an error says: its vendor type, message and (OpenAI only) code. */
export interface ErrorFields {
  type: string
  message: string
  /** OpenAI's `code`; null when left out. Anthropic's envelope has none. */
  code?: string | null
  /** OpenAI's `param`, the field refused; null when left out. */
  param?: string | null
}

/** An error body in the dialect's envelope. */
export function errorBody(
  dialect: Dialect,
  { type, message, code = null, param = null }: ErrorFields,
) {
  return dialect === 'openai'
    ? { error: { message, type, param, code } }
    : { type: 'error', error: { type, message } }
}

/** Error bodies in each vendor's envelope. */
export function errorResponse(
  dialect: Dialect,
  status: number,
  error: ErrorFields,
  headers: Record<string, string> = {},
): Response {
  return jsonResponse(errorBody(dialect, error), status, headers)
}

/** 200 with a body cut in half: valid HTTP, invalid JSON (or a broken SSE event). */
export function malformedResponse(payload: Payload): Response {
  // For a stream, the first event cut inside its JSON data line, then the stream ends.
  const first = payload.sse ? payload.text.slice(0, payload.text.indexOf('\n\n')) : payload.text
  const cut = first.slice(0, Math.max(1, first.length >> 1))
  const text = payload.sse ? `${cut}\n\n` : cut
  return new Response(text, { headers: payload.sse ? sseHeaders : jsonHeaders })
}

/** A stream's first half of events, then a clean end: no [DONE] or last event. A body: malformed. */
export function cutResponse(payload: Payload): Response {
  if (!payload.sse) return malformedResponse(payload)
  const events = payload.text.split('\n\n').filter((event) => event !== '')
  const kept = events.slice(0, Math.max(1, events.length >> 1))
  return new Response(kept.map((event) => `${event}\n\n`).join(''), { headers: sseHeaders })
}

/** Sends the headers and half the body, then resets the connection. */
export function resetResponse(payload: Payload): Response {
  const half = encodeUtf8(payload.text.slice(0, Math.max(1, payload.text.length >> 1)))
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      controller.enqueue(half)
      // Let the half body reach the socket before it is torn down.
      await Bun.sleep(5)
      // error() without a reason: Bun resets the socket and, unlike with a reason, logs nothing.
      controller.error()
    },
  })
  return new Response(body, { headers: payload.sse ? sseHeaders : jsonHeaders })
}

/** Sends the body in up to 50 small pieces spread evenly over trickleMs. */
export function trickleResponse(payload: Payload, trickleMs: number): Response {
  const bytes = encodeUtf8(payload.text)
  const pieces = Math.max(1, Math.min(50, Math.ceil(bytes.length / 16)))
  const size = Math.ceil(bytes.length / pieces)
  const gapMs = trickleMs / pieces
  let sent = 0
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (sent >= bytes.length) {
        controller.close()
        return
      }
      await Bun.sleep(gapMs)
      controller.enqueue(bytes.subarray(sent, sent + size))
      sent += size
    },
  })
  return new Response(body, { headers: payload.sse ? sseHeaders : jsonHeaders })
}

/** A server-sent events body from (event name, data) pairs; OpenAI's ends with [DONE]. */
export function sseText(events: [string | null, unknown][], done: boolean): string {
  let text = ''
  for (const [event, data] of events) {
    if (event !== null) text += `event: ${event}\n`
    text += `data: ${JSON.stringify(data)}\n\n`
  }
  if (done) text += 'data: [DONE]\n\n'
  return text
}
