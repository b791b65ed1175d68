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

export interface ReadBodyOptions {
  /**
   * Bodies of at least this many bytes are read into shared memory, so a thread can read them
   * without a copy of its own (parallel-validation.ts). Unset: never.
   */
  sharedFrom?: number
}

export async function readBody(request: Request, limit: number, options: ReadBodyOptions = {}): Promise<Uint8Array> {
  const declared = Number(request.headers.get('content-length') ?? NaN)
  if (declared > limit) throw tooLarge(limit)
  if (!request.body) return new Uint8Array(0)
  const sharedFrom = options.sharedFrom ?? Infinity
  /** Room for `capacity` bytes, shared if the body is known to need at least sharedFrom. */
  const allocate = (capacity: number, needed: number) =>
    new Uint8Array(needed >= sharedFrom ? new SharedArrayBuffer(capacity) : new ArrayBuffer(capacity))
  // One allocation of the declared size; grows by doubling only for chunked uploads.
  const known = Number.isFinite(declared) && declared > 0 ? declared : 0
  let buffer = allocate(known || 64 * 1024, known)
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
      const grown = allocate(Math.min(limit, Math.max(buffer.byteLength * 2, size + value.byteLength)), size + value.byteLength)
      grown.set(buffer.subarray(0, size))
      buffer = grown
    }
    buffer.set(value, size)
    size += value.byteLength
  }
  if (size >= sharedFrom && !(buffer.buffer instanceof SharedArrayBuffer)) {
    // A chunked upload that fit in the first buffer.
    const shared = allocate(size, size)
    shared.set(buffer.subarray(0, size))
    return shared
  }
  return buffer.subarray(0, size)
}
