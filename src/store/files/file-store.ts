/**
 * Files and uploads (docs/openai-facade.md, docs/money-and-limits.md): the metadata of uploads
 * and of the output and error files rendered from a batch's results, and the per-account file
 * quotas held under racing uploads. Their content lives in a BlobStore (blob-store.ts: on disk or
 * in PostgreSQL). One implementation a dialect (sqlite-files.ts with sqlite-uploads.ts,
 * postgres-files.ts with postgres-uploads.ts), one contract (test/store/files.test.ts).
 */
import type { BatchStatus } from '../../domain.ts'
import { num, type Row } from '../connection.ts'

/** A file's metadata. Uploaded content lives in a BlobStore; rendered files have none. */
export interface FileRecord {
  id: string
  accountId: string
  purpose: 'batch' | 'batch_output'
  filename: string
  /** null for a rendered file whose size is not known yet. */
  bytes: number | null
  createdAt: number
  lastUsedAt: number
  /** For rendered files: the batch whose results they show, and which of them. */
  batchId: string | null
  kind: 'upload' | 'output' | 'error'
  /**
   * When an upload expires (Unix seconds; files.create's `expires_after`): from then on it is
   * gone for its account, and the janitor deletes it. Null or absent: it never expires so.
   */
  expiresAt?: number | null
}

/** A rendered file with the state of its batch, which decides whether it exists yet. */
export interface FileView extends FileRecord {
  batchStatus: BatchStatus | null
  batchCounts: { succeeded: number; unsuccessful: number } | null
}

/** A page of an account's files: listFiles. */
export interface FilePage {
  limit: number
  after: string | null
  purpose: string | null
  order: 'asc' | 'desc'
  /** Unix seconds; files expired by then are left out (default: now). */
  now?: number
}

export interface FileStore {
  createFile(file: FileRecord): Promise<void>
  /** Another account's file is null; so is one expired at `nowSeconds` (default: now). */
  getFile(accountId: string, id: string, nowSeconds?: number): Promise<FileView | null>
  /**
   * Newest first (or oldest first with order 'asc'); `after` is the last id of the previous page.
   * Files expired at `page.now` (Unix seconds, default: now) are left out.
   */
  listFiles(accountId: string, page: FilePage): Promise<{ files: FileView[]; hasMore: boolean }>
  deleteFile(accountId: string, id: string): Promise<boolean>
  setFileBytes(id: string, bytes: number): Promise<void>
  touchFile(id: string, at: number): Promise<void>
}

/** The limits an upload is checked against: the account's own, or these defaults. */
export interface FileQuotaDefaults {
  maxFiles: number
  maxStoredBytes: number
}

/** An upload about to stream: one file and `bytes` to reserve. `nowMs` stamps its renewal. */
export interface NewUpload {
  fileId: string
  accountId: string
  bytes: number
  nowMs: number
}

/** File limits to set; null puts one back to the default, undefined leaves it as it is. */
export interface FileLimits {
  maxFiles?: number | null
  maxStoredBytes?: number | null
}

/** An account's file limits (null: the default applies) and what its uploads use now. */
export interface FileQuotaView {
  maxFiles: number | null
  maxStoredBytes: number | null
  /** Uploads stored plus uploads being received. */
  filesInUse: number
  /** Bytes of uploads stored plus bytes reserved by uploads being received. */
  storedBytes: number
}

/** An upload's reservation to grow: to `want` bytes if that fits, else to `need`, renewed at `nowMs`. */
export interface UploadGrowth {
  fileId: string
  need: number
  want: number
  nowMs: number
}

export type ReserveResult =
  /** `bytes`: what the upload may now grow to without asking again. */
  | { kind: 'reserved'; bytes: number }
  | {
      kind: 'limit_exceeded'
      limit: { files: number; in_use: number } | { stored_bytes: number; in_use: number }
    }
  /** The reservation is gone (the janitor took it for a dead upload's). */
  | { kind: 'gone' }

/**
 * Per-account file quotas (docs/money-and-limits.md), held under racing uploads: an upload reserves its place
 * before its first byte is stored and grows its reservation as it streams, each step checked
 * atomically against what the account's other files and uploads use.
 */
export interface UploadStore {
  /** Reserves one file and `bytes` for an upload about to stream. */
  reserveUpload(upload: NewUpload, defaults: FileQuotaDefaults): Promise<ReserveResult>
  /**
   * Grows (and renews) an upload's reservation to `want` bytes if that fits, else to `need`;
   * refuses when even `need` does not fit.
   */
  growUpload(growth: UploadGrowth, defaults: FileQuotaDefaults): Promise<ReserveResult>
  /** Replaces the reservation by the file's record, in one transaction; false when it is gone. */
  commitUpload(file: FileRecord): Promise<boolean>
  releaseUpload(fileId: string): Promise<void>
  /** Deletes reservations not renewed since `staleBeforeMs` (their upload died); returns their ids. */
  expireUploads(staleBeforeMs: number, limit: number): Promise<string[]>
  /** Which of these ids have a file record or an upload reservation. */
  knownFileIds(ids: readonly string[]): Promise<Set<string>>
  /** The account's file limits and usage; null for a missing account. */
  getFileQuota(accountId: string): Promise<FileQuotaView | null>
  /** Sets the given limits (null: back to the default); false for a missing account. */
  setFileQuota(accountId: string, limits: FileLimits): Promise<boolean>
}

/** A row of either dialect, joined with its batch's status and counts → a file view. */
export function rowToFile(row: Row): FileView {
  return {
    id: row.id as string,
    accountId: row.account_id as string,
    purpose: row.purpose as FileView['purpose'],
    filename: row.filename as string,
    bytes: num(row.bytes),
    createdAt: Number(row.created_at),
    lastUsedAt: Number(row.last_used_at),
    batchId: (row.batch_id as string | null) ?? null,
    kind: row.kind as FileView['kind'],
    ...(row.expires_at === null || row.expires_at === undefined
      ? {}
      : { expiresAt: Number(row.expires_at) }),
    batchStatus: (row.batch_status as FileView['batchStatus']) ?? null,
    batchCounts:
      row.batch_status === null || row.batch_status === undefined
        ? null
        : {
            succeeded: Number(row.succeeded),
            unsuccessful: Number(row.failed) + Number(row.cancelled) + Number(row.expired),
          },
  }
}
