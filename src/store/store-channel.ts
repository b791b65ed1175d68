/**
 * Messages between the instances sharing a store, on a channel of the store's own (on
 * PostgreSQL, LISTEN/NOTIFY in the store's schema, so other fleets and test schemas stay apart).
 * Best effort: a message sent while the database restarts is lost, so it may only ever save
 * time, never carry state.
 */
export interface StoreChannel {
  /** Calls `onMessage` with every payload sent on the channel, this instance's own included. */
  listen(onMessage: (payload: string) => void): Promise<void>
  send(payload: string): Promise<void>
  close(): Promise<void>
}
