/**
 * Retention (docs/operations.md): the janitor's deletes. Safe to run on every instance at once:
 * each item is taken by one of them. Retention's own deletes (PurgeStore) are here, one
 * implementation a dialect (sqlite-retention.ts, postgres-retention.ts), one contract
 * (test/store/retention.test.ts); the janitor also expires dead uploads' reservations and
 * dashboard sessions, which are the files' and the accounts' roles.
 */
import type { SessionStore } from '../accounts/account-store.ts'
import type { UploadStore } from '../files/file-store.ts'

/** What retention deletes on its own: ended batches' results, unused uploads' records. */
export interface PurgeStore {
  /** Deletes the lines and rendered files of batches that ended before `cutoff`; returns their ids. */
  purgeResults(cutoff: number, limit: number, now: number): Promise<string[]>
  /**
   * Deletes the records of uploads unused since `cutoff` or expired at `now` (their own
   * `expires_at`); returns their ids, for their content.
   */
  deleteStaleUploads(cutoff: number, limit: number, now: number): Promise<string[]>
}

/** Everything the janitor calls. */
export interface RetentionStore
  extends
    PurgeStore,
    Pick<UploadStore, 'expireUploads' | 'knownFileIds'>,
    Pick<SessionStore, 'deleteExpiredSessions'> {}
