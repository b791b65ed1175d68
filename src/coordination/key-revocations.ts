/**
 * Key revocations told to every instance sharing the store, so each drops the key from its cache
 * (src/auth/key-cache.ts) at once instead of serving it until the cache's entry is due
 * (MULTIGRID_KEY_CACHE_MS): a revoked key is answered 401 from then on, not a second later. On
 * PostgreSQL a revocation is a message on the store's channel (NOTIFY), sent by the instance or
 * the operator's CLI that revoked the key; with SQLite there is one process. Best effort like
 * every signal on the channel: one lost while the database restarts leaves the cache's TTL as
 * the bound. With SQLite the operator's CLI is another process with no channel: a gateway
 * running then refuses the key within that TTL.
 */
import type { StoreChannel } from '../store/store-channel.ts'
import type { Logger } from '../telemetry/logger.ts'

/** The store channel revocations go on (open-store.ts openStoreChannel); the payload is the key id. */
export const KEY_REVOCATIONS_CHANNEL = 'multigrid_keys'

export interface KeyRevocations {
  /** Forgets the key here at once, and on every other instance when the message arrives. */
  publish(keyId: string): void
  close(): Promise<void>
}

/** Listens on `channel` (null: one process) and forgets each key revoked anywhere. */
export async function openKeyRevocations(
  channel: StoreChannel | null,
  logger: Logger,
  forget: (keyId: string) => void,
): Promise<KeyRevocations> {
  await channel?.listen(forget)
  return {
    publish(keyId) {
      forget(keyId)
      channel?.send(keyId).catch((error) => {
        logger.warn('key_revocations.notify_failed', { reason: (error as Error).message })
      })
    },
    async close() {
      await channel?.close()
    },
  }
}
