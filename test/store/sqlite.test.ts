import { createSqliteStore } from '../../src/store/sqlite/sqlite-store.ts'
import { runStoreContract } from './contract.ts'

runStoreContract('sqlite', async () => createSqliteStore(null))
