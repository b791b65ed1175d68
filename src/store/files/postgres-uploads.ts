/**
 * File quotas and uploads in progress on PostgreSQL. Every check-and-write holds a transaction-
 * scoped advisory lock on the account's files (not the account row, which admissions and live
 * charges lock), so uploads racing on several instances are counted one after another.
 */
import type postgres from 'postgres'
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

type Db = postgres.ISql
type Sql = postgres.Sql

const lockFiles = (tx: Db, accountId: string) =>
  tx`SELECT pg_advisory_xact_lock(hashtext(${`multigrid.files:${accountId}`}))`

async function ownLimits(db: Db, accountId: string) {
  const [row] =
    await db`SELECT max_files, max_stored_bytes FROM account_file_quotas WHERE account_id = ${accountId}`
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
async function usage(db: Db, accountId: string, except: string | null) {
  const [row] = await db`
    SELECT
      (SELECT count(*) FROM files WHERE account_id = ${accountId} AND kind = 'upload')
        + (SELECT count(*) FROM upload_reservations
           WHERE account_id = ${accountId} AND file_id IS DISTINCT FROM ${except}::text) AS files,
      (SELECT coalesce(sum(bytes), 0) FROM files WHERE account_id = ${accountId} AND kind = 'upload')
        + (SELECT coalesce(sum(bytes), 0) FROM upload_reservations
           WHERE account_id = ${accountId} AND file_id IS DISTINCT FROM ${except}::text) AS bytes`
  return { files: Number(row!.files), bytes: Number(row!.bytes) }
}

export function reserveUpload(
  sql: Sql,
  upload: NewUpload,
  defaults: FileQuotaDefaults,
): Promise<ReserveResult> {
  return sql.begin(async (tx): Promise<ReserveResult> => {
    await lockFiles(tx, upload.accountId)
    const decision = decideQuota({
      own: await ownLimits(tx, upload.accountId),
      defaults,
      used: await usage(tx, upload.accountId, null),
      addsFile: true,
      need: upload.bytes,
      want: upload.bytes,
    })
    if (decision.kind !== 'reserved') return decision
    await tx`
      INSERT INTO upload_reservations (file_id, account_id, bytes, renewed_at)
      VALUES (${upload.fileId}, ${upload.accountId}, ${decision.bytes}, ${Math.floor(upload.nowMs)})`
    return decision
  })
}

export async function growUpload(
  sql: Sql,
  { fileId, need, want, nowMs }: UploadGrowth,
  defaults: FileQuotaDefaults,
): Promise<ReserveResult> {
  const [found] = await sql`SELECT account_id FROM upload_reservations WHERE file_id = ${fileId}`
  if (!found) return { kind: 'gone' }
  const accountId = found.account_id as string
  return sql.begin(async (tx): Promise<ReserveResult> => {
    await lockFiles(tx, accountId)
    const [row] = await tx`SELECT 1 FROM upload_reservations WHERE file_id = ${fileId}`
    if (!row) return { kind: 'gone' }
    const decision = decideQuota({
      own: await ownLimits(tx, accountId),
      defaults,
      used: await usage(tx, accountId, fileId),
      addsFile: false,
      need,
      want: Math.max(want, need),
    })
    if (decision.kind !== 'reserved') return decision
    await tx`
      UPDATE upload_reservations SET bytes = ${decision.bytes}, renewed_at = ${Math.floor(nowMs)}
      WHERE file_id = ${fileId}`
    return decision
  })
}

export function commitUpload(sql: Sql, file: FileRecord): Promise<boolean> {
  return sql.begin(async (tx) => {
    const gone = await tx`DELETE FROM upload_reservations WHERE file_id = ${file.id} RETURNING 1`
    if (gone.length === 0) return false
    await tx`
      INSERT INTO files (id, account_id, purpose, filename, bytes, created_at, last_used_at,
        batch_id, kind, expires_at)
      VALUES (${file.id}, ${file.accountId}, ${file.purpose}, ${file.filename}, ${file.bytes},
        ${file.createdAt}, ${file.lastUsedAt}, ${file.batchId}, ${file.kind},
        ${file.expiresAt ?? null})`
    return true
  })
}

export async function releaseUpload(sql: Sql, fileId: string) {
  await sql`DELETE FROM upload_reservations WHERE file_id = ${fileId}`
}

export async function expireUploads(
  sql: Sql,
  staleBeforeMs: number,
  limit: number,
): Promise<string[]> {
  const rows = await sql`
    DELETE FROM upload_reservations WHERE file_id IN (
      SELECT file_id FROM upload_reservations WHERE renewed_at < ${Math.floor(staleBeforeMs)}
      LIMIT ${limit} FOR UPDATE SKIP LOCKED)
    RETURNING file_id`
  return rows.map((row) => row.file_id as string)
}

export async function knownFileIds(sql: Sql, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set()
  const rows = await sql`
    SELECT id FROM files WHERE id = ANY(${[...ids]}::text[])
    UNION SELECT file_id FROM upload_reservations WHERE file_id = ANY(${[...ids]}::text[])`
  return new Set(rows.map((row) => row.id as string))
}

export async function getFileQuota(sql: Sql, accountId: string): Promise<FileQuotaView | null> {
  const [account] = await sql`SELECT 1 FROM accounts WHERE id = ${accountId}`
  if (!account) return null
  const used = await usage(sql, accountId, null)
  return { ...(await ownLimits(sql, accountId)), filesInUse: used.files, storedBytes: used.bytes }
}

export async function setFileQuota(sql: Sql, accountId: string, limits: FileLimits) {
  const keepFiles = limits.maxFiles === undefined
  const keepBytes = limits.maxStoredBytes === undefined
  const rows = await sql`
    INSERT INTO account_file_quotas (account_id, max_files, max_stored_bytes)
    SELECT ${accountId}, ${limits.maxFiles ?? null}::int, ${limits.maxStoredBytes ?? null}::bigint
    WHERE EXISTS (SELECT 1 FROM accounts WHERE id = ${accountId})
    ON CONFLICT (account_id) DO UPDATE SET
      max_files = CASE WHEN ${keepFiles} THEN account_file_quotas.max_files ELSE EXCLUDED.max_files END,
      max_stored_bytes = CASE WHEN ${keepBytes} THEN account_file_quotas.max_stored_bytes ELSE EXCLUDED.max_stored_bytes END
    RETURNING 1`
  return rows.length > 0
}
