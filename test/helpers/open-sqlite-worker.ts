/** A thread that opens the embedded store's file as every connection does and says how it went. */
import { openSqliteDatabase } from '../../src/store/sqlite/open-database.ts'

declare const self: Worker

self.onmessage = (event: MessageEvent<string>) => {
  try {
    openSqliteDatabase(event.data).close()
    self.postMessage('opened')
  } catch (error) {
    self.postMessage((error as Error).message)
  }
}
