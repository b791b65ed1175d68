/**
 * Turns an upstream status or exception into an UpstreamError. Adapters classify here, at the
 * edge; only the dispatcher's retry policy decides what to do with the result.
 */
import type { UpstreamError, UpstreamErrorKind } from './types.ts'

const retryableKinds: Record<UpstreamErrorKind, boolean> = {
  rate_limited: true,
  busy: true,
  server_error: true,
  timeout: true,
  connection: true,
  malformed_response: true,
  invalid_request: false,
  context_length_exceeded: false,
  auth: false,
}

export function upstreamError(
  kind: UpstreamErrorKind,
  message: string,
  fields: { status?: number | null; retryAfterMs?: number | null; body?: unknown } = {},
): UpstreamError {
  return {
    kind,
    retryable: retryableKinds[kind],
    status: fields.status ?? null,
    retryAfterMs: fields.retryAfterMs ?? null,
    message,
    body: fields.body ?? null,
  }
}

/**
 * `retry-after-ms` (OpenAI, milliseconds) wins over `retry-after` (RFC 9110: delay-seconds or
 * an HTTP-date). A date in the past means "now": 0.
 */
export function parseRetryAfter(
  header: (name: string) => string | null,
  now: number = Date.now(),
): number | null {
  const milliseconds = header('retry-after-ms')?.trim()
  if (milliseconds && /^\d+(\.\d+)?$/.test(milliseconds)) return Math.ceil(Number(milliseconds))
  const value = header('retry-after')?.trim()
  if (!value) return null
  if (/^\d+(\.\d+)?$/.test(value)) return Math.ceil(Number(value) * 1000)
  const date = Date.parse(value)
  return Number.isNaN(date) ? null : Math.max(0, date - now)
}

// OpenAI: code context_length_exceeded / "maximum context length"; Anthropic: "prompt is too
// long"; vLLM: "maximum context length"; TGI: "`inputs` tokens + `max_new_tokens` must be <=";
// llama.cpp: "exceeds the available context size".
const contextPattern = new RegExp(
  [
    'context[_ ]length',
    'maximum context',
    'context window',
    'context size',
    'prompt is too long',
    'input is too long',
    'max_new_tokens',
  ].join('|'),
  'i',
)

/** The vendor's error message and code, from OpenAI's or Anthropic's envelope. */
function errorFields(body: unknown): { message: string; code: string } {
  const error = (body as { error?: unknown } | null)?.error
  if (typeof error === 'string') return { message: error, code: '' }
  if (typeof error !== 'object' || error === null) {
    const message = (body as { message?: unknown } | null)?.message
    return { message: typeof message === 'string' ? message : '', code: '' }
  }
  const { message, code, type } = error as Record<string, unknown>
  return {
    message: typeof message === 'string' ? message : '',
    code: typeof code === 'string' ? code : typeof type === 'string' ? type : '',
  }
}

/** Removes the key, and anything that looks like one, from upstream text shown to users. */
export function redactKey(text: string, apiKey: string | null): string {
  let out = text
  if (apiKey && apiKey.length >= 4) out = out.split(apiKey).join('[redacted]')
  // OpenAI echoes a masked key in 401s ("sk-abc***xyz"); drop even the masked form.
  return out.replace(/\b(sk|key)-[\w*.-]{8,}/g, '[redacted]')
}

function redactBody(body: unknown, apiKey: string | null): unknown {
  if (body === null || body === undefined) return null
  const text = JSON.stringify(body)
  const clean = redactKey(text, apiKey)
  return clean === text ? body : JSON.parse(clean)
}

/** A non-2xx answer. `text` is the raw body; it is parsed here when it is JSON. */
export function classifyStatus(
  status: number,
  header: (name: string) => string | null,
  text: string,
  apiKey: string | null,
): UpstreamError {
  let body: unknown = null
  try {
    body = text === '' ? null : JSON.parse(text)
  } catch {
    body = { raw: text.slice(0, 2000) }
  }
  body = redactBody(body, apiKey)
  const { message: vendorMessage, code } = errorFields(body)
  const detail = redactKey(vendorMessage || text.slice(0, 200), apiKey).slice(0, 300)
  const message = `upstream answered ${status}${detail ? `: ${detail}` : ''}`
  const fields = { status, retryAfterMs: parseRetryAfter(header), body }

  // OpenAI's flex lane out of capacity (docs/pricing.md): busy, not a rate limit — the call waits or
  // spills like one to a full pool, uses no attempt, and pauses nothing.
  if (status === 429 && code === 'resource_unavailable')
    return upstreamError('busy', message, fields)
  if (status === 429) return upstreamError('rate_limited', message, fields)
  if (status === 408) return upstreamError('timeout', message, fields)
  if (status === 401 || status === 403) return upstreamError('auth', message, fields)
  // At capacity, not broken: vLLM with a full queue, OpenAI "engine overloaded", Anthropic 529.
  if (status === 503 || status === 529) return upstreamError('busy', message, fields)
  if (status >= 500) return upstreamError('server_error', message, fields)
  if (status >= 400) {
    const tooLong = code === 'context_length_exceeded' || contextPattern.test(vendorMessage)
    return upstreamError(tooLong ? 'context_length_exceeded' : 'invalid_request', message, fields)
  }
  // 1xx/3xx: nothing usable arrived; a redirect is not followed for a POST with a key in it.
  return upstreamError('server_error', message, fields)
}

const connectCodes = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'CONNECT_TIMEOUT',
])

function errorCode(error: unknown): string {
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'string' ? code : ''
}

/** True when no connection could be made at all: the replica is down, not merely slow. */
export function isConnectFailure(error: unknown): boolean {
  return connectCodes.has(errorCode(error))
}

const closedCodes = new Set(['ECONNRESET', 'EPIPE'])

/**
 * True when the socket closed under a request: before the status line, this is mostly a
 * keep-alive connection the replica had already closed (or a replica that was just killed).
 */
export function isSocketClosed(error: unknown): boolean {
  return closedCodes.has(errorCode(error))
}

/** How the call's deadline ended, when an exception was thrown. */
export interface AbortCause {
  timedOut: boolean
  callerAborted: boolean
  timeoutMs: number
  /** Set when the timeout meant something else than no whole answer in time (a stream's). */
  timeoutText?: string
}

/** An exception from the HTTP client: no (complete) response arrived. */
export function classifyException(
  error: unknown,
  cause: AbortCause,
  apiKey: string | null,
): UpstreamError {
  if (cause.timedOut) {
    return upstreamError(
      'timeout',
      cause.timeoutText ?? `no complete answer within ${cause.timeoutMs} ms`,
    )
  }
  if (cause.callerAborted)
    return { ...upstreamError('connection', 'request aborted by the caller'), callerAborted: true }
  const code = errorCode(error)
  const text = error instanceof Error ? error.message : String(error)
  const detail = redactKey(`${code ? `${code}: ` : ''}${text}`, apiKey).slice(0, 300)
  return upstreamError('connection', `connection failed: ${detail}`)
}
