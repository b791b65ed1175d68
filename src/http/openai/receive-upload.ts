/**
 * One upload from its first byte to its file record, within the account's file quotas (docs/money-and-limits.md)
 * and leaving nothing behind when it fails.
 *
 * - Before any byte is stored, the upload reserves one file and its declared size (less an
 *   allowance for the multipart framing around the file) — refused at once with 429 when that
 *   does not fit. Streaming past what it reserved grows the reservation in 1 MiB steps, each
 *   checked atomically in the store, so racing uploads cannot together pass max_stored_bytes.
 * - On success the reservation becomes the file's record in one transaction; on any failure
 *   (bad multipart, client gone, over a limit, wrong purpose) the content is deleted and the
 *   reservation released before the error is answered.
 * - A crash leaves a reservation that stops being renewed: the janitor deletes it and its content.
 */
import { refuse, type GatewayError } from '../../errors.ts'
import type { BlobStore } from '../../store/files/blob-store.ts'
import { UPLOAD_RENEW_MS } from '../../store/files/upload-lease.ts'
import type {
  FileQuotaDefaults,
  FileRecord,
  ReserveResult,
  UploadStore,
} from '../../store/store.ts'

/** Multipart framing around the file: boundaries, part headers, the `purpose` field (~300 bytes from the SDKs). */
const FRAMING_ALLOWANCE = 4096
const GROW_STEP = 1 << 20

export interface ReceiveDeps {
  store: UploadStore
  blobs: BlobStore
  quotaDefaults: FileQuotaDefaults
}

export interface IncomingUpload {
  id: string
  accountId: string
  /** The request's Content-Length, when it declared one. */
  declaredBytes: number | null
  /** Reads the body, storing the file's content through `meter`; resolves with the record to commit. */
  receive(
    meter: (content: AsyncIterable<Uint8Array>) => AsyncIterable<Uint8Array>,
  ): Promise<FileRecord>
}

export async function receiveUpload(
  { store, blobs, quotaDefaults }: ReceiveDeps,
  upload: IncomingUpload,
): Promise<FileRecord> {
  const { id } = upload
  const initial =
    upload.declaredBytes === null ? 0 : Math.max(0, upload.declaredBytes - FRAMING_ALLOWANCE)
  const first = await store.reserveUpload(
    { fileId: id, accountId: upload.accountId, bytes: initial, nowMs: Date.now() },
    quotaDefaults,
  )
  if (first.kind !== 'reserved') throw refusal(first)
  let reserved = first.bytes
  let size = 0
  let failure: unknown = null
  const grow = async (need: number, want: number) => {
    const result = await store.growUpload(
      { fileId: id, need, want, nowMs: Date.now() },
      quotaDefaults,
    )
    if (result.kind !== 'reserved') throw refusal(result)
    reserved = result.bytes
  }
  // Renewed while it streams, also when the client pauses, so no janitor takes it for dead.
  let renewal: Promise<void> = Promise.resolve()
  const timer = setInterval(() => {
    renewal = grow(size, reserved).catch((error) => {
      failure = error
    })
  }, UPLOAD_RENEW_MS)
  async function* meter(content: AsyncIterable<Uint8Array>) {
    for await (const chunk of content) {
      if (failure) throw failure
      size += chunk.byteLength
      if (size > reserved) await grow(size, size + GROW_STEP)
      yield chunk
    }
  }
  try {
    const file = await upload.receive(meter)
    clearInterval(timer)
    await renewal
    if (failure) throw failure
    if (!(await store.commitUpload(file))) throw refusal({ kind: 'gone' })
    return file
  } catch (error) {
    clearInterval(timer)
    await renewal
    // Content first: once the reservation is gone, nothing says this content is wanted.
    await blobs.delete(id).catch(() => {})
    await store.releaseUpload(id).catch(() => {})
    throw error
  }
}

function refusal(result: Exclude<ReserveResult, { kind: 'reserved' }>): GatewayError {
  if (result.kind === 'gone') {
    return refuse(
      'upload_timeout',
      'the upload stalled for minutes and was dropped; send the file again',
    )
  }
  const limit = result.limit
  const message =
    'files' in limit
      ? `the account already has ${limit.in_use} file${limit.in_use === 1 ? '' : 's'}, its limit of ${limit.files}; delete files it no longer needs (files.delete) before uploading more`
      : `this upload would pass the account's limit of ${limit.stored_bytes} stored bytes (${limit.in_use} in use); delete files it no longer needs or upload a smaller one`
  return refuse('limit_exceeded', message, { param: 'file', detail: { limit } })
}
