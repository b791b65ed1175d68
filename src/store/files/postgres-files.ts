/**
 * File metadata on PostgreSQL, as the embedded store keeps it: uploads, and the output and error
 * files rendered from a batch's results, which exist only once their batch has finished with
 * lines of their kind.
 */
import type postgres from 'postgres'
import { ENDED_BATCH_STATUSES, nowSeconds } from '../../domain.ts'
import type { PostgresPool } from '../connection.ts'
import {
  rowToFile,
  type FilePage,
  type FileRecord,
  type FileStore,
  type FileView,
  type UploadStore,
} from './file-store.ts'
import * as uploads from './postgres-uploads.ts'

type Db = postgres.ISql

const ENDED_STATUSES = [...ENDED_BATCH_STATUSES]

/** The file and upload store on PostgreSQL. */
export function createPostgresFileStore(sql: PostgresPool): FileStore & UploadStore {
  return {
    createFile: (file) => createFile(sql, file),
    getFile: (accountId, id, now) => getFile(sql, accountId, id, now),
    listFiles: (accountId, page) => listFiles(sql, accountId, page),
    deleteFile: (accountId, id) => deleteFile(sql, accountId, id),
    setFileBytes: (id, bytes) => setFileBytes(sql, id, bytes),
    touchFile: (id, at) => touchFile(sql, id, at),
    reserveUpload: (upload, defaults) => uploads.reserveUpload(sql, upload, defaults),
    growUpload: (growth, defaults) => uploads.growUpload(sql, growth, defaults),
    commitUpload: (file) => uploads.commitUpload(sql, file),
    releaseUpload: (fileId) => uploads.releaseUpload(sql, fileId),
    expireUploads: (staleBeforeMs, limit) => uploads.expireUploads(sql, staleBeforeMs, limit),
    knownFileIds: (ids) => uploads.knownFileIds(sql, ids),
    getFileQuota: (accountId) => uploads.getFileQuota(sql, accountId),
    setFileQuota: (accountId, limits) => uploads.setFileQuota(sql, accountId, limits),
  }
}

const select = (db: Db) => db`
  SELECT f.*, b.status AS batch_status, b.succeeded, b.failed, b.cancelled, b.expired
  FROM files f LEFT JOIN batches b ON b.id = f.batch_id`

const visible = (db: Db) => db`
  (f.batch_id IS NULL OR (b.status = ANY(${ENDED_STATUSES}::text[])
    AND ((f.kind = 'output' AND b.succeeded > 0)
      OR (f.kind = 'error' AND b.failed + b.cancelled + b.expired > 0))))`

export async function createFile(db: Db, file: FileRecord) {
  await db`
    INSERT INTO files (id, account_id, purpose, filename, bytes, created_at, last_used_at,
      batch_id, kind, expires_at)
    VALUES (${file.id}, ${file.accountId}, ${file.purpose}, ${file.filename}, ${file.bytes},
      ${file.createdAt}, ${file.lastUsedAt}, ${file.batchId}, ${file.kind},
      ${file.expiresAt ?? null})`
}

/** An upload past its own expiry is gone (files.create's expires_after). */
const notExpired = (db: Db, now: number) => db`(f.expires_at IS NULL OR f.expires_at > ${now})`

export async function getFile(
  db: Db,
  accountId: string,
  id: string,
  now = nowSeconds(),
): Promise<FileView | null> {
  const [row] = await db`
    ${select(db)} WHERE f.id = ${id} AND f.account_id = ${accountId} AND ${visible(db)}
      AND ${notExpired(db, now)}`
  return row ? rowToFile(row) : null
}

export async function listFiles(db: Db, accountId: string, page: FilePage) {
  const ascending = page.order === 'asc'
  const purpose = page.purpose === null ? db`` : db`AND f.purpose = ${page.purpose}`
  const after =
    page.after === null
      ? db``
      : ascending
        ? db`AND f.id > ${page.after}`
        : db`AND f.id < ${page.after}`
  const rows = await db`
    ${select(db)} WHERE f.account_id = ${accountId} AND ${visible(db)}
      AND ${notExpired(db, page.now ?? nowSeconds())} ${purpose} ${after}
    ORDER BY f.id ${ascending ? db`ASC` : db`DESC`} LIMIT ${page.limit + 1}`
  return { files: rows.slice(0, page.limit).map(rowToFile), hasMore: rows.length > page.limit }
}

export async function deleteFile(db: Db, accountId: string, id: string) {
  const result = await db`DELETE FROM files WHERE id = ${id} AND account_id = ${accountId}`
  return result.count > 0
}

export async function setFileBytes(db: Db, id: string, bytes: number) {
  await db`UPDATE files SET bytes = ${bytes} WHERE id = ${id}`
}

export async function touchFile(db: Db, id: string, at: number) {
  await db`UPDATE files SET last_used_at = ${Math.floor(at)} WHERE id = ${id}`
}
