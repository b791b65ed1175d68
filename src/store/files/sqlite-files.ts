/**
 * File metadata on bun:sqlite: uploads, and the output and error files rendered from a batch's
 * results, which exist only once their batch has ended with lines of their kind. The quotas and
 * uploads in progress are sqlite-uploads.ts's.
 */
import { ENDED_BATCH_STATUSES } from '../../domain.ts'
import { sqliteQuery as q, type SqliteConnection } from '../connection.ts'
import { sqlWordList } from '../sqlite/sql-word-list.ts'
import { nowSeconds } from '../../domain.ts'
import { rowToFile, type FileStore, type UploadStore } from './file-store.ts'
import * as uploads from './sqlite-uploads.ts'

/** A rendered output or error file exists once its batch has ended with lines of its kind. */
export const VISIBLE_FILE = `(f.batch_id IS NULL OR (b.status IN ${sqlWordList(ENDED_BATCH_STATUSES)}
  AND ((f.kind = 'output' AND b.succeeded > 0) OR (f.kind = 'error' AND b.failed + b.cancelled + b.expired > 0))))`
/** An upload past its own expiry is gone (files.create's expires_after); the one `?` is now. */
const NOT_EXPIRED = '(f.expires_at IS NULL OR f.expires_at > ?)'
const FILE_SELECT = `SELECT f.*, b.status AS batch_status, b.succeeded, b.failed, b.cancelled, b.expired
  FROM files f LEFT JOIN batches b ON b.id = f.batch_id`

/** The file and upload store on bun:sqlite. */
export function createSqliteFileStore(db: SqliteConnection): FileStore & UploadStore {
  return {
    async createFile(file) {
      uploads.insertFile(db, file)
    },
    async getFile(accountId, id, now = nowSeconds()) {
      const row = q(
        db,
        `${FILE_SELECT} WHERE f.id = ? AND f.account_id = ? AND ${VISIBLE_FILE} AND ${NOT_EXPIRED}`,
      ).get(id, accountId, now)
      return row ? rowToFile(row) : null
    },
    async listFiles(accountId, page) {
      const direction = page.order === 'asc' ? 'ASC' : 'DESC'
      const rows = q(
        db,
        `${FILE_SELECT} WHERE f.account_id = ? AND ${VISIBLE_FILE} AND ${NOT_EXPIRED}
           AND (? IS NULL OR f.purpose = ?) AND (? IS NULL OR f.id ${page.order === 'asc' ? '>' : '<'} ?)
         ORDER BY f.id ${direction} LIMIT ?`,
      ).all(
        accountId,
        page.now ?? nowSeconds(),
        page.purpose,
        page.purpose,
        page.after,
        page.after,
        page.limit + 1,
      )
      return { files: rows.slice(0, page.limit).map(rowToFile), hasMore: rows.length > page.limit }
    },
    async deleteFile(accountId, id) {
      return (
        q(db, 'DELETE FROM files WHERE id = ? AND account_id = ?').run(id, accountId).changes > 0
      )
    },
    async setFileBytes(id, bytes) {
      q(db, 'UPDATE files SET bytes = ? WHERE id = ?').run(bytes, id)
    },
    async touchFile(id, at) {
      q(db, 'UPDATE files SET last_used_at = ? WHERE id = ?').run(at, id)
    },
    async reserveUpload(upload, defaults) {
      return uploads.reserveUpload(db, upload, defaults)
    },
    async growUpload(growth, defaults) {
      return uploads.growUpload(db, growth, defaults)
    },
    async commitUpload(file) {
      return uploads.commitUpload(db, file)
    },
    async releaseUpload(fileId) {
      uploads.releaseUpload(db, fileId)
    },
    async expireUploads(staleBeforeMs, limit) {
      return uploads.expireUploads(db, staleBeforeMs, limit)
    },
    async knownFileIds(ids) {
      return uploads.knownFileIds(db, ids)
    },
    async getFileQuota(accountId) {
      return uploads.getFileQuota(db, accountId)
    },
    async setFileQuota(accountId, limits) {
      return uploads.setFileQuota(db, accountId, limits)
    },
  }
}
