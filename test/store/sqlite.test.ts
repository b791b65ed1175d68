import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { runStoreContract } from './contract.ts'

// In memory: one connection, the dispatcher's statements on the calling thread.
runStoreContract('sqlite', async () => createSqliteStore(null))
// On disk, as the gateway runs it: the dispatcher's statements on their own thread and connection.
runStoreContract('sqlite file', async () => createSqliteStore(mkdtempSync(join(tmpdir(), 'mg-contract-'))))
