/**
 * Reads a request body with a limit: the one way any route reads a body. Refused with 413 as soon
 * as its size is known to be over the limit: from Content-Length before reading anything, or as
 * the chunks of a chunked body arrive (reading stops there; Bun discards the rest as it comes,
 * without holding it). A body compressed in transit is 415 before anything is read. A connection
 * that closes before the body is whole is a `BodyAborted`, logged as an aborted request.
 */
import { GatewayError, refuse } from '../errors.ts'

/** A route's body limit and what to tell a caller who passes it. Made in src/http/body-limits.ts. */
export interface BodyLimit {
  bytes: number
  /** What the body is, for the message: "a sign-in form", "a live request". */
  what: string
  /** What to do instead, e.g. "split the requests into several files". */
  fix: string
  /** The error code; `request_too_large` unless the body is a file. */
  code?: 'request_too_large' | 'file_too_large'
  /**
   * A form around one file: the file's own limit, which the refusal names (`bytes` adds room for
   * the form's framing; the file's size is checked again as it is stored).
   */
  fileBytes?: number
}

const asLimit = (limit: BodyLimit | number): BodyLimit =>
  typeof limit === 'number'
    ? { bytes: limit, what: 'the body', fix: 'send a smaller file', code: 'file_too_large' }
    : limit

export function tooLarge(limit: BodyLimit | number) {
  const { bytes, what, fix, code, fileBytes } = asLimit(limit)
  const most = fileBytes ?? bytes
  return refuse(
    code ?? 'request_too_large',
    `${what} may be at most ${most} bytes (${describeBytes(most)}) and this one is larger; ${fix}`,
    { detail: { limit_bytes: most } },
  )
}

/**
 * The connection closed before the whole body arrived: the client hung up, or sent chunked
 * framing Bun could not parse (Bun then answers 400 itself and ends the stream the same way, so
 * the two look alike from here). Nobody reads the answer; the error handler logs it at info.
 */
export class BodyAborted extends GatewayError {
  constructor(readonly reason: string) {
    super(
      'request_aborted',
      'the connection closed before the whole body arrived; send the request again with a complete body (and, if chunked, valid chunk framing)',
    )
  }
}

/**
 * Refuses what can be refused from the headers alone: a declared Content-Length over the limit
 * (413) and a body compressed in transit (415; `identity` is no compression and is accepted).
 */
export function refuseByHeaders(request: Request, limit: BodyLimit | number) {
  const encoding = request.headers.get('content-encoding')
  if (encoding !== null) {
    const codings = encoding
      .split(',')
      .map((c) => c.trim().toLowerCase())
      .filter((c) => c !== '')
    const other = codings.find((c) => c !== 'identity')
    if (other !== undefined) {
      throw refuse(
        'unsupported_encoding',
        `Content-Encoding ${other} is not accepted; send the body uncompressed (no Content-Encoding, or identity)`,
        { param: 'content-encoding' },
      )
    }
  }
  const declared = Number(request.headers.get('content-length') ?? NaN)
  if (declared > asLimit(limit).bytes) throw tooLarge(limit)
}

/**
 * Where a body is read into, for the code that reads it next: the file validator hands big files
 * to a thread, which reads shared memory where it is (parallel-validation.ts). Bodies it does not
 * want go to ordinary memory.
 */
export interface BodyBuffers {
  /** Whether a body of this many bytes goes into these buffers. */
  wants(bytes: number): boolean
  /** Room for this many bytes. */
  allocate(bytes: number): Uint8Array
}

export interface ReadBodyOptions {
  /** The buffers of the body's next reader (see BodyBuffers). Unset: ordinary memory. */
  into?: BodyBuffers
}

export async function readBody(
  request: Request,
  limit: BodyLimit | number,
  options: ReadBodyOptions = {},
): Promise<Uint8Array> {
  refuseByHeaders(request, limit)
  const max = asLimit(limit).bytes
  if (!request.body) return new Uint8Array(0)
  const declared = Number(request.headers.get('content-length') ?? NaN)
  const into = options.into
  /** Whether the current buffer is one of `into`'s. */
  let chosen = false
  /** Room for `capacity` bytes: one of `into`'s if the body is known to need `needed` and it wants that. */
  const allocate = (capacity: number, needed: number) => {
    chosen = into !== undefined && into.wants(needed)
    return chosen ? into!.allocate(capacity) : new Uint8Array(capacity)
  }
  const known = Number.isFinite(declared) && declared > 0 ? declared : 0
  if (known > 0 && !into?.wants(known)) {
    // A declared length within the limit: Bun reads exactly that many bytes (the framing ends
    // the body there), so its own reader is safe, and quicker than the loop below.
    try {
      return new Uint8Array(await request.arrayBuffer())
    } catch (error) {
      throw new BodyAborted(String((error as Error)?.message ?? error))
    }
  }
  // One allocation of the declared size; grows by doubling only for chunked uploads.
  let buffer = allocate(known || Math.min(max, 64 * 1024), known)
  let size = 0
  const reader = request.body.getReader()
  for (;;) {
    let next: Awaited<ReturnType<typeof reader.read>>
    try {
      next = await reader.read()
    } catch (error) {
      throw new BodyAborted(String((error as Error)?.message ?? error))
    }
    const { done, value } = next
    if (done) break
    if (size + value.byteLength > max) {
      await reader.cancel().catch(() => {})
      throw tooLarge(limit)
    }
    if (size + value.byteLength > buffer.byteLength) {
      const grown = allocate(
        Math.min(max, Math.max(buffer.byteLength * 2, size + value.byteLength)),
        size + value.byteLength,
      )
      grown.set(buffer.subarray(0, size))
      buffer = grown
    }
    buffer.set(value, size)
    size += value.byteLength
  }
  if (!chosen && into?.wants(size)) {
    // A chunked upload that fit in the first buffer.
    const wanted = allocate(size, size)
    wanted.set(buffer.subarray(0, size))
    return wanted
  }
  return buffer.subarray(0, size)
}

/**
 * A JSON body read with its limit: `ok: false` when it is not JSON, so the caller can say what to
 * send; an empty body is `undefined`. Invalid UTF-8 is replaced, as `request.json()` does.
 */
export async function readJsonBody(
  request: Request,
  limit: BodyLimit,
): Promise<{ ok: true; value: unknown } | { ok: false }> {
  refuseByHeaders(request, limit)
  const declared = Number(request.headers.get('content-length') ?? NaN)
  if (declared === 0) return { ok: true, value: undefined }
  if (declared > 0) {
    // Within the limit (checked above), and Bun reads exactly the declared bytes: its own parser
    // is safe here, and 1–3 µs of CPU cheaper per call than decoding and parsing below (the
    // live path's budget is ~60 µs). A SyntaxError is bad JSON; anything else, a broken body.
    try {
      return { ok: true, value: await request.json() }
    } catch (error) {
      if (error instanceof SyntaxError) return { ok: false }
      throw new BodyAborted(String((error as Error)?.message ?? error))
    }
  }
  const bytes = await readBody(request, limit)
  if (bytes.byteLength === 0) return { ok: true, value: undefined }
  try {
    return { ok: true, value: JSON.parse(decoder.decode(bytes)) }
  } catch {
    return { ok: false }
  }
}

/** A form body (urlencoded or multipart) read with its limit, or null when it is no form. */
export async function readFormBody(request: Request, limit: BodyLimit): Promise<FormData | null> {
  const bytes = await readBody(request, limit)
  const type = request.headers.get('content-type') ?? ''
  try {
    return await new Response(bytes as Uint8Array<ArrayBuffer>, {
      headers: { 'content-type': type },
    }).formData()
  } catch {
    return null
  }
}

const decoder = new TextDecoder()

/** 4096 → "4 KiB", 16777216 → "16 MiB", 200000000 → "190.7 MiB". */
export function describeBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB']
  let value = bytes
  let unit = 0
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024
    unit++
  }
  const shown = Number.isInteger(value) ? String(value) : value.toFixed(1)
  return `${shown} ${units[unit]}`
}
