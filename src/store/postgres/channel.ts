/**
 * A StoreChannel on PostgreSQL: NOTIFY on a channel named for the store's schema, LISTENed to by
 * every instance. postgres.js holds the LISTEN on a connection of its own and LISTENs again when
 * that connection comes back (checked on 3.4.9 with the server restarted, and stopped for 4 s
 * then started).
 */
import type { StoreChannel } from '../store-channel.ts'
import { connectPostgres } from './connect.ts'

export function openPostgresChannel(
  connection: { url: string; schema: string | undefined },
  name: string,
): StoreChannel {
  // Two connections: one to NOTIFY on, and the one postgres.js opens for LISTEN.
  const sql = connectPostgres({ ...connection, max: 1, idleTimeoutSeconds: 60 })
  // PostgreSQL's identifiers, channel names included, are at most 63 bytes.
  const channel = `${name}.${connection.schema ?? 'public'}`.slice(0, 63)
  return {
    async listen(onMessage) {
      await sql.listen(channel, onMessage)
    },
    async send(payload) {
      await sql.notify(channel, payload)
    },
    async close() {
      await sql.end({ timeout: 1 })
    },
  }
}
