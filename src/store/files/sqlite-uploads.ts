/**
 * File quotas and uploads in progress on bun:sqlite. Every check-and-write
 * runs in one IMMEDIATE transaction, so racing uploads are counted one after another.
 */
import { sqliteQuery as q, type SqliteConnection } from '../connection.ts'
import { decideQuota } from './file-quota.ts'
import type {
  FileLimits,
  FileQuotaDefaults,
  FileQuotaView,
  FileRecord,
  NewUpload,
  ReserveResult,
  UploadGrowth,
} from './file-store.ts'

type Database = SqliteConnection
const tx = <T>(db: Database, fn: () => T): T => db.transaction(fn).immediate()

function ownLimits(db: Database, accountId: string) {
  const row = q(
    db,
    'SELECT max_files, max_stored_bytes FROM account_file_quotas WHERE account_id = ?',
  ).get(accountId)
  return {
    maxFiles:
      row?.max_files === null || row?.max_files === undefined ? null : Number(row.max_files),
    maxStoredBytes:
      row?.max_stored_bytes === null || row?.max_stored_bytes === undefined
        ? null
        : Number(row.max_stored_bytes),
  }
}

/** Uploads stored plus uploads in progress, leaving out the reservation `except`. */
function usage(db: Database, accountId: string, except: string | null) {
  const row = q(
    db,
    `SELECT
       (SELECT count(*) FROM files WHERE account_id = ?1 AND kind = 'upload')
         + (SELECT count(*) FROM upload_reservations WHERE account_id = ?1 AND file_id IS NOT ?2) AS files,
       (SELECT coalesce(sum(bytes), 0) FROM files WHERE account_id = ?1 AND kind = 'upload')
         + (SELECT coalesce(sum(bytes), 0) FROM upload_reservations WHERE account_id = ?1 AND file_id IS NOT ?2) AS bytes`,
  ).get(accountId, except)!
  return { files: Number(row.files), bytes: Number(row.bytes) }
}

export function reserveUpload(
  db: Database,
  upload: NewUpload,
  defaults: FileQuotaDefaults,
): ReserveResult {
  return tx(db, () => {
    const decision = decideQuota({
      own: ownLimits(db, upload.accountId),
      defaults,
      used: usage(db, upload.accountId, null),
      addsFile: true,
      need: upload.bytes,
      want: upload.bytes,
    })
    if (decision.kind !== 'reserved') return decision
    q(
      db,
      'INSERT INTO upload_reservations (file_id, account_id, bytes, renewed_at) VALUES (?, ?, ?, ?)',
    ).run(upload.fileId, upload.accountId, decision.bytes, Math.floor(upload.nowMs))
    return decision
  })
}

export function growUpload(
  db: Database,
  { fileId, need, want, nowMs }: UploadGrowth,
  defaults: FileQuotaDefaults,
): ReserveResult {
  return tx(db, (): ReserveResult => {
    const row = q(db, 'SELECT account_id, bytes FROM upload_reservations WHERE file_id = ?').get(
      fileId,
    )
    if (!row) return { kind: 'gone' }
    const decision = decideQuota({
      own: ownLimits(db, row.account_id),
      defaults,
      used: usage(db, row.account_id, fileId),
      addsFile: false,
      need,
      want: Math.max(want, need),
    })
    if (decision.kind !== 'reserved') return decision
    q(db, 'UPDATE upload_reservations SET bytes = ?, renewed_at = ? WHERE file_id = ?').run(
      decision.bytes,
      Math.floor(nowMs),
      fileId,
    )
    return decision
  })
}

/** A file's record (an upload's when committed, a rendered file's when its batch makes it). */
export function insertFile(db: Database, file: FileRecord) {
  q(
    db,
    `INSERT INTO files (id, account_id, purpose, filename, bytes, created_at, last_used_at, batch_id, kind, expires_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  ).run(
    file.id,
    file.accountId,
    file.purpose,
    file.filename,
    file.bytes,
    file.createdAt,
    file.lastUsedAt,
    file.batchId,
    file.kind,
    file.expiresAt ?? null,
  )
}

export function commitUpload(db: Database, file: FileRecord): boolean {
  return tx(db, () => {
    if (q(db, 'DELETE FROM upload_reservations WHERE file_id = ?').run(file.id).changes === 0)
      return false
    insertFile(db, file)
    return true
  })
}

export function releaseUpload(db: Database, fileId: string) {
  q(db, 'DELETE FROM upload_reservations WHERE file_id = ?').run(fileId)
}

export function expireUploads(db: Database, staleBeforeMs: number, limit: number): string[] {
  return q(
    db,
    `DELETE FROM upload_reservations WHERE file_id IN (
       SELECT file_id FROM upload_reservations WHERE renewed_at < ? LIMIT ?) RETURNING file_id`,
  )
    .all(Math.floor(staleBeforeMs), limit)
    .map((row) => row.file_id as string)
}

export function knownFileIds(db: Database, ids: readonly string[]): Set<string> {
  const known = new Set<string>()
  // SQLite binds at most 32,766 parameters per statement; 500 ids (twice) per query stays far below.
  for (let i = 0; i < ids.length; i += 500) {
    const part = ids.slice(i, i + 500)
    const marks = part.map(() => '?').join(', ')
    const rows = q(
      db,
      `SELECT id FROM files WHERE id IN (${marks}) UNION SELECT file_id FROM upload_reservations WHERE file_id IN (${marks})`,
    ).all(...part, ...part)
    for (const row of rows) known.add(row.id as string)
  }
  return known
}

export function getFileQuota(db: Database, accountId: string): FileQuotaView | null {
  if (!q(db, 'SELECT 1 FROM accounts WHERE id = ?').get(accountId)) return null
  const used = usage(db, accountId, null)
  return { ...ownLimits(db, accountId), filesInUse: used.files, storedBytes: used.bytes }
}

export function setFileQuota(db: Database, accountId: string, limits: FileLimits): boolean {
  return tx(db, () => {
    if (!q(db, 'SELECT 1 FROM accounts WHERE id = ?').get(accountId)) return false
    const current = ownLimits(db, accountId)
    q(
      db,
      `INSERT INTO account_file_quotas (account_id, max_files, max_stored_bytes) VALUES (?1, ?2, ?3)
       ON CONFLICT (account_id) DO UPDATE SET max_files = ?2, max_stored_bytes = ?3`,
    ).run(
      accountId,
      limits.maxFiles === undefined ? current.maxFiles : limits.maxFiles,
      limits.maxStoredBytes === undefined ? current.maxStoredBytes : limits.maxStoredBytes,
    )
    return true
  })
}
