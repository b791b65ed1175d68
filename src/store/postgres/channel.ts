/**
 * A StoreChannel on PostgreSQL: NOTIFY on a channel named for the store's schema, LISTENed to by
 * every instance. postgres.js holds the LISTEN on a connection of its own and LISTENs again when
 * that connection comes back (checked on 3.4.9 with the server restarted, and stopped for 4 s
 * then started).
 *
 * The channels an instance opens on one database (nudges, batch changes, key revocations) share
 * one client: two connections in all, one to NOTIFY on and the one postgres.js LISTENs on for
 * every channel, not two per channel.
 */
import type postgres from 'postgres'
import type { StoreChannel } from '../store-channel.ts'
import { connectPostgres } from './connect.ts'

interface Shared {
  sql: postgres.Sql
  /** Channels open on it; the client ends with the last. */
  users: number
}

/** The channels' connections in pg_stat_activity. */
export const CHANNEL_CONNECTION_NAME = 'multigrid channels'

/** The shared clients, by URL and schema. */
const clients = new Map<string, Shared>()

export function openPostgresChannel(
  connection: { url: string; schema: string | undefined },
  name: string,
): StoreChannel {
  const key = `${connection.url} ${connection.schema ?? ''}`
  let shared = clients.get(key)
  if (!shared) {
    const sql = connectPostgres({
      ...connection,
      max: 1,
      idleTimeoutSeconds: 60,
      name: CHANNEL_CONNECTION_NAME,
    })
    clients.set(key, (shared = { sql, users: 0 }))
  }
  shared.users++
  const { sql } = shared
  // PostgreSQL's identifiers, channel names included, are at most 63 bytes.
  const channel = `${name}.${connection.schema ?? 'public'}`.slice(0, 63)
  const listening: { unlisten(): Promise<void> }[] = []
  let closed = false
  return {
    async listen(onMessage) {
      listening.push(await sql.listen(channel, onMessage))
    },
    async send(payload) {
      await sql.notify(channel, payload)
    },
    async close() {
      if (closed) return
      closed = true
      for (const listener of listening.splice(0)) await listener.unlisten().catch(() => {})
      if (--shared.users > 0) return
      clients.delete(key)
      await sql.end({ timeout: 1 })
    },
  }
}
