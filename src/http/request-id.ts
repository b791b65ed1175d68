/**
 * Each request's id: sent back as `x-request-id` (OpenAI's header; `request-id` too under
 * /anthropic, where Anthropic's SDK reads it) and written on the request's `http.request` and
 * `http.unhandled` log lines, so a user quoting one answer leads the operator to its lines.
 *
 * An id the caller or a proxy in front already set (`X-Request-Id`) is kept when it is plain
 * (letters, digits, `._:-`, at most 128), so one id follows a request through both; otherwise the
 * gateway makes one: this process's random prefix and a counter, unique across a fleet and
 * cheaper than a random UUID on every live call.
 */
const PLAIN_ID = /^[A-Za-z0-9._:-]{1,128}$/
const PREFIX = `req_${crypto.randomUUID().replaceAll('-', '').slice(0, 12)}`
let count = 0

export const REQUEST_ID_HEADER = 'x-request-id'

/** The id of `request`: the plain one it came with, or a new one. */
export function requestIdOf(request: Request): string {
  const sent = request.headers.get(REQUEST_ID_HEADER)
  if (sent !== null && PLAIN_ID.test(sent)) return sent
  return `${PREFIX}${(++count).toString(36)}`
}

/** The id already set on an answer's headers, when the request got that far. */
export const answeredRequestId = (headers: Record<string, string>): string | undefined =>
  headers[REQUEST_ID_HEADER]
