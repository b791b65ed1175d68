/**
 * The file-quota decision both stores make inside their transaction (docs/money-and-limits.md): given what the
 * account's other files and uploads use, may this upload count one more file, and how many
 * bytes may it reserve?
 */
import type { FileQuotaDefaults, ReserveResult } from './file-store.ts'

export interface QuotaInput {
  /** The account's own limits; null where the default applies. */
  own: { maxFiles: number | null; maxStoredBytes: number | null }
  defaults: FileQuotaDefaults
  /** Files and bytes of the account's stored uploads and other uploads in progress. */
  used: { files: number; bytes: number }
  /** True when this upload is new (it adds a file); false when it grows. */
  addsFile: boolean
  /** Bytes this upload must have, and bytes it would like to reserve ahead. */
  need: number
  want: number
}

export type QuotaDecision =
  { kind: 'reserved'; bytes: number } | Extract<ReserveResult, { kind: 'limit_exceeded' }>

export function decideQuota(input: QuotaInput): QuotaDecision {
  const maxFiles = input.own.maxFiles ?? input.defaults.maxFiles
  const maxBytes = input.own.maxStoredBytes ?? input.defaults.maxStoredBytes
  if (input.addsFile && input.used.files + 1 > maxFiles) {
    return { kind: 'limit_exceeded', limit: { files: maxFiles, in_use: input.used.files } }
  }
  const room = maxBytes - input.used.bytes
  if (input.want <= room) return { kind: 'reserved', bytes: input.want }
  if (input.need <= room) return { kind: 'reserved', bytes: input.need }
  return { kind: 'limit_exceeded', limit: { stored_bytes: maxBytes, in_use: input.used.bytes } }
}
