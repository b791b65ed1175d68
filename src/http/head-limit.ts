/**
 * A request's head (request line and headers) is at most 16 KiB, as Node's and Bun's default
 * limits have it; over that it is refused 431 in the docs/errors.md envelope.
 *
 * Bun's HTTP parser refuses a head over its own limit itself, from a fixed string with no body
 * and no hook, before any JavaScript runs (docs/RELIABILITY.md). So the gateway is started with
 * Bun's limit raised to 64 KiB (`--max-http-header-size`, as package.json and the Dockerfile do):
 * heads between the two are read and answered here. 64 KiB, not more, because the parser holds
 * a head in memory until it is whole, per connection.
 */
import http from 'node:http'
import { refuse, type GatewayError } from '../errors.ts'

export const MAX_HEAD_BYTES = 16 * 1024
/** The Bun limit the gateway is meant to run with; bun --max-http-header-size. */
export const PARSER_HEAD_BYTES = 64 * 1024
/** Bun's arguments that start a gateway with it (package.json and the Dockerfile say the same). */
export const GATEWAY_BUN_ARGS = [`--max-http-header-size=${PARSER_HEAD_BYTES}`]

/** Bun's own limit in this process (node:http reports the flag's value). */
export const parserHeadBytes = (): number => http.maxHeaderSize

/**
 * The refusal for a head over MAX_HEAD_BYTES, or undefined. The headers are read in one call
 * (Bun's Headers.toJSON), not one callback per header (forEach): 0.15 against 0.6 µs for a live
 * call's, on every request.
 */
export function headTooLarge(request: Request): GatewayError | undefined {
  // "METHOD URL HTTP/1.1\r\n", then "name: value\r\n" per header: the URL's path and query are
  // what the client sent (the origin Bun adds is a few bytes more, on the safe side).
  let bytes = request.method.length + request.url.length + 11
  const headers = (
    request.headers as unknown as { toJSON(): Record<string, string | string[]> }
  ).toJSON()
  for (const name in headers) {
    const value = headers[name]
    // set-cookie comes as a list: one line each.
    if (typeof value === 'string') bytes += name.length + value.length + 4
    else for (const one of value) bytes += name.length + one.length + 4
  }
  if (bytes <= MAX_HEAD_BYTES) return undefined
  return refuse(
    'headers_too_large',
    `the request line and headers are about ${bytes} bytes, over the limit of ${MAX_HEAD_BYTES}; send fewer or shorter headers (a long query belongs in a body)`,
  )
}
