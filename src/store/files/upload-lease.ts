/**
 * How an upload in progress stays distinguishable from one whose instance died: its reservation
 * (store.ts UploadStore) is renewed every RENEW_MS while it streams, and the janitor takes one not
 * renewed for STALE_MS as dead — four missed renewals, so a busy instance is never mistaken.
 */
export const UPLOAD_RENEW_MS = 30_000
export const UPLOAD_STALE_MS = 120_000
