/**
 * The same `Idempotency-Key` sent with another request (docs/native-api.md, "Submit"):
 * each surface hashes what its caller sent under a key, the batch keeps the hash
 * (`batches.request_hash`), and a later request with that key and another hash is refused
 * `422 idempotency_key_reused`, naming the batch the key made, instead of being answered with
 * that batch as if it were the one asked for. A batch stored without a hash (before there was
 * one) matches any request, as before.
 */
import { createHash } from 'node:crypto'
import type { BatchRecord } from '../domain.ts'
import { GatewayError, refuse } from '../errors.ts'
import { excerpt } from '../excerpt.ts'

/**
 * A request's hash: its body (as bodyDigest gives it, if it has one) and the options that shape
 * the batch, as JSON in a fixed order, so the same request always hashes the same.
 */
export function requestHash(
  body: string | null,
  options: Record<string, string | number | boolean | null | undefined>,
): string {
  const hash = createHash('sha256')
  if (body !== null) hash.update(body)
  hash.update('\n')
  hash.update(
    JSON.stringify(
      Object.keys(options)
        .sort()
        .map((name) => [name, options[name] ?? null]),
    ),
  )
  return hash.digest('hex')
}

/** How much of a body is hashed between two turns of the event loop: about half a millisecond. */
const SLICE_BYTES = 1024 * 1024

/**
 * A body's SHA-256, hex, a slice per turn of the event loop: a 16 MiB file's whole (about 10 ms)
 * would hold every other request that long. (WebCrypto's digest, which runs on a thread of its
 * own, refuses a body in shared memory, as a big one is: src/ingest/parallel-validation.ts.)
 */
export async function bodyDigest(bytes: Uint8Array): Promise<string> {
  const hash = createHash('sha256')
  for (let at = 0; at < bytes.byteLength; at += SLICE_BYTES) {
    if (at > 0) await new Promise((resolve) => setImmediate(resolve))
    hash.update(bytes.subarray(at, at + SLICE_BYTES))
  }
  return hash.digest('hex')
}

/**
 * The batch an idempotency key made (found first, or made meanwhile by a request racing this
 * one), as the answer to a request with that key hashed `hash`: to the same request only; to
 * another, the refusal is thrown.
 */
export function keysBatch(existing: BatchRecord, hash: string | null | undefined): BatchRecord {
  if (!hash || !existing.requestHash || existing.requestHash === hash) return existing
  throw keyReusedRefusal(existing.idempotencyKey ?? '', existing.id)
}

/** The id of the batch a refused reused key made, when `error` is that refusal; else null. */
export function keyReusedBatch(error: unknown): string | null {
  if (!(error instanceof GatewayError) || error.refusal !== 'idempotency_key_reused') return null
  return String(error.options.detail?.batch_id)
}

/** The refusal naming the batch `key` made as the surface names it (`msgbatch_…` on Anthropic's). */
export const keyReusedRefusal = (key: string, batchId: string) =>
  refuse(
    'idempotency_key_reused',
    `the Idempotency-Key ${JSON.stringify(excerpt(key))} was first sent with another request, which made batch ${batchId}; send a new key for a new batch, or that first request unchanged to get its batch`,
    { detail: { batch_id: batchId } },
  )
