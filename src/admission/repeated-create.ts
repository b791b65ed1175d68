/**
 * A create repeated (docs/openai-facade.md, docs/clients/anthropic-sdk.md): with an
 * `Idempotency-Key`, the batch that key first made; without one, the official SDKs' retry of a
 * timed-out create (`x-stainless-retry-count` above 0) gets the batch its first attempt made,
 * found by the body's hash.
 *
 * The hash names a body only within a window of 10-minute buckets, the bucket of the create in
 * the key: the SDKs give up on a create within about 30 minutes (a 10-minute timeout, two
 * retries), so a retry looks at the last four buckets, newest first, and never finds the batch
 * the same body made last week. Creates of one body within one bucket each take the next key of
 * the bucket (`…:bucket`, `…:bucket#1`, …), and a retry gets the latest: the one its own first
 * attempt made, not an earlier deliberate create of the same body.
 */
import type { BatchRecord } from '../domain.ts'
import { parseWholeNumber } from '../schemas/whole-number.ts'
import type { BatchStore } from '../store/store.ts'
import { bodyDigest, keysBatch } from './request-hash.ts'

const BUCKET_S = 600
const BUCKETS = 4
/** Creates of one body one bucket tells apart; past them a create keeps no key. */
const PER_BUCKET = 16

/** The `n`th key of a body in a bucket (`base`): the first keeps the plain form. */
const nth = (base: string, n: number) => (n === 0 ? base : `${base}#${n}`)

export interface CreateKeys {
  /** The caller's `Idempotency-Key`, if it sent one. */
  explicit: string | null
  /** Sent by an SDK's retry. */
  retried: boolean
  /** The body's key in this create's bucket, then in the earlier buckets a retry may come from. */
  hashed: string[]
  /** The body as request-hash.ts names a request, for the batch an explicit key makes. */
  requestHash: string
}

/** `surface` keeps the facade's and the Anthropic API's hashes apart. */
export async function createKeys(
  request: Request,
  surface: 'openai' | 'anthropic',
  body: string | Uint8Array,
  nowS: number,
): Promise<CreateKeys> {
  // A Message Batches body may be megabytes: hashed a slice per turn of the event loop.
  const hash = await bodyDigest(typeof body === 'string' ? Buffer.from(body) : body)
  const bucket = Math.floor(nowS / BUCKET_S)
  const retryCount = request.headers.get('x-stainless-retry-count') ?? '0'
  return {
    explicit: request.headers.get('idempotency-key'),
    retried: (parseWholeNumber(retryCount, 0, 1_000) ?? 0) > 0,
    hashed: Array.from({ length: BUCKETS }, (_, back) => `${surface}:${hash}:${bucket - back}`),
    requestHash: `${surface}:${hash}`,
  }
}

/** The batch an earlier create of this one made, or null when it is a create of its own. */
export async function earlierCreate(
  store: Pick<BatchStore, 'findByIdempotencyKey'>,
  accountId: string,
  keys: CreateKeys,
): Promise<BatchRecord | null> {
  if (keys.explicit) {
    const earlier = await store.findByIdempotencyKey(accountId, keys.explicit)
    return earlier && keysBatch(earlier, keys.requestHash)
  }
  if (!keys.retried) return null
  for (const base of keys.hashed) {
    let latest: BatchRecord | null = null
    for (let n = 0; n < PER_BUCKET; n++) {
      const earlier = await store.findByIdempotencyKey(accountId, nth(base, n))
      if (!earlier) break
      latest = earlier
    }
    if (latest) return latest
  }
  return null
}

/**
 * The key the new batch is stored with (the caller's, else the body's in this bucket if free)
 * and, with a key, the request's hash it keeps.
 */
export async function keyToStore(
  store: Pick<BatchStore, 'findByIdempotencyKey'>,
  accountId: string,
  keys: CreateKeys,
): Promise<{ idempotencyKey: string | null; requestHash: string | null }> {
  const key = keys.explicit ?? (await freeKey(store, accountId, keys.hashed[0]!))
  return { idempotencyKey: key, requestHash: key ? keys.requestHash : null }
}

/** The body's first key in this bucket no batch has yet, or null past PER_BUCKET of them. */
async function freeKey(
  store: Pick<BatchStore, 'findByIdempotencyKey'>,
  accountId: string,
  base: string,
): Promise<string | null> {
  for (let n = 0; n < PER_BUCKET; n++) {
    const key = nth(base, n)
    if (!(await store.findByIdempotencyKey(accountId, key))) return key
  }
  return null
}
