/**
 * Reads a request body into one buffer, refusing it with 413 as soon as its size is known to be
 * over the limit: from Content-Length before reading anything, or mid-stream otherwise.
 */
import { GatewayError } from '../errors.ts'

export function tooLarge(limit: number) {
  return new GatewayError(
    413,
    'invalid_request_error',
    'file_too_large',
    `the body is larger than the ${limit}-byte limit`,
    { detail: { limit_bytes: limit } },
  )
}

export async function readBody(request: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(request.headers.get('content-length') ?? NaN)
  if (declared > limit) throw tooLarge(limit)
  if (!request.body) return new Uint8Array(0)
  // One allocation of the declared size; grows by doubling only for chunked uploads.
  let buffer = new Uint8Array(Number.isFinite(declared) && declared > 0 ? declared : 64 * 1024)
  let size = 0
  const reader = request.body.getReader()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    if (size + value.byteLength > limit) {
      await reader.cancel().catch(() => {})
      throw tooLarge(limit)
    }
    if (size + value.byteLength > buffer.byteLength) {
      const grown = new Uint8Array(Math.min(limit, Math.max(buffer.byteLength * 2, size + value.byteLength)))
      grown.set(buffer.subarray(0, size))
      buffer = grown
    }
    buffer.set(value, size)
    size += value.byteLength
  }
  return buffer.subarray(0, size)
}
