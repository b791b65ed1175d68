/**
 * The shards of a batch's progress (docs/scale.md): who writes which row of `batch_progress`, so
 * that no two instances ever write the same one. Both stores use these names.
 */

/** The shard of an instance's claims; its settlements and retries write the shard named `owner`. */
export const claimShard = (owner: string) => `${owner}/claim`

/** The shard of lines handed back by the reaper or a stopping instance (their batch rows locked). */
export const RETURNED_SHARD = 'returned'

/** A shard's integer columns, each a change to the batch row's column of the same name. */
export const PROGRESS_COUNTS = [
  'pending',
  'running',
  'succeeded',
  'failed',
  'usage_input_tokens',
  'usage_cached_input_tokens',
  'usage_cache_write_tokens',
  'usage_output_tokens',
] as const

/** A shard's money columns (decimal), likewise. */
export const PROGRESS_MONEY = [
  'cost_usd',
  'held_usd',
  'reserved_usd',
  'usage_uncached_cost_usd',
] as const
