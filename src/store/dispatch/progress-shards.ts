/**
 * The shards of a batch's progress (docs/scale.md): who writes which row of `batch_progress`, so
 * that no two instances ever write the same one. Both stores use these names.
 */

/** The shard of an instance's claims; its settlements and retries write the shard named `owner`. */
export const claimShard = (owner: string) => `${owner}/claim`

/** The shard of lines handed back by the reaper or a stopping instance (their batch rows locked). */
export const RETURNED_SHARD = 'returned'
