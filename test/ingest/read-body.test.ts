/**
 * readBody: the whole body in one buffer, refused with 413 once it is known to be too big, and
 * read into the buffers its next reader asks for: the file validator's shared memory from a size
 * on (so the validation thread reads it without a copy).
 */
import { describe, expect, test } from 'bun:test'
import { GatewayError } from '../../src/errors.ts'
import { sharedBodiesFrom } from '../../src/ingest/parallel-validation.ts'
import { readBody } from '../../src/ingest/read-body.ts'

const URL = 'http://127.0.0.1/v1/batches'

/** A request whose body arrives in `chunks` pieces with no Content-Length, as a chunked upload does. */
function chunked(bytes: Uint8Array, chunks: number): Request {
  const size = Math.ceil(bytes.byteLength / chunks)
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let at = 0; at < bytes.byteLength; at += size)
        controller.enqueue(bytes.slice(at, at + size))
      controller.close()
    },
  })
  return new Request(URL, { method: 'POST', body: stream, duplex: 'half' } as RequestInit)
}

const body = (size: number) => Uint8Array.from({ length: size }, (_, i) => 97 + (i % 26))

describe('reading a request body', () => {
  test("a body the validator's buffers want is read into shared memory, a smaller one is not", async () => {
    const big = body(4096)
    const shared = await readBody(new Request(URL, { method: 'POST', body: big }), 1 << 20, {
      into: sharedBodiesFrom(4096),
    })
    expect(shared.buffer).toBeInstanceOf(SharedArrayBuffer)
    expect(Buffer.from(shared).equals(Buffer.from(big))).toBe(true)

    const small = await readBody(new Request(URL, { method: 'POST', body: body(4095) }), 1 << 20, {
      into: sharedBodiesFrom(4096),
    })
    expect(small.buffer).toBeInstanceOf(ArrayBuffer)
    expect(small.byteLength).toBe(4095)

    const never = await readBody(new Request(URL, { method: 'POST', body: big }), 1 << 20)
    expect(never.buffer).toBeInstanceOf(ArrayBuffer)
    // A validator on one core splits nothing, and wants no shared memory.
    const unsplit = await readBody(new Request(URL, { method: 'POST', body: big }), 1 << 20, {
      into: sharedBodiesFrom(Infinity),
    })
    expect(unsplit.buffer).toBeInstanceOf(ArrayBuffer)
  })

  test('a chunked upload that grows past what the buffers want ends in shared memory, every byte in place', async () => {
    const big = body(300_000)
    const read = await readBody(chunked(big, 40), 1 << 20, { into: sharedBodiesFrom(200_000) })
    expect(read.buffer).toBeInstanceOf(SharedArrayBuffer)
    expect(Buffer.from(read).equals(Buffer.from(big))).toBe(true)
  })

  test('a chunked upload over the limit is refused with 413 mid-stream', async () => {
    const error = await readBody(chunked(body(300_000), 10), 100_000, {
      into: sharedBodiesFrom(1),
    }).catch((e) => e)
    expect(error).toBeInstanceOf(GatewayError)
    expect((error as GatewayError).status).toBe(413)
  })
})
