/**
 * A data dir made by the first release (test/store/fixtures/sqlite-first-release.sql: its schema,
 * which had no `files` table and no batches.purged_at, and rows as its code wrote them) opens in
 * place under the current gateway, keeps its records, and retention then purges its old results.
 * Before SQLite had migrations the gateway opened it but never added purged_at, so the janitor's
 * every pass failed on it.
 */
import { Database } from 'bun:sqlite'
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { readSqliteMigrations } from '../../src/store/sqlite/migrate.ts'
import { startTestGateway, type TestGateway } from '../helpers/gateway.ts'

const DAY = 86_400
/** The fixture's times: batch_old finished at T, batch_new 29 days later. */
const T = 1_796_000_000
/** The key the fixture stores the hash of. */
const KEY = 'mg_first-release-data-dir-key'
// The longest allowed, so the janitor's own pass at start-up (at the real time) finds nothing
// due for years, and the test's pass, at a time of its choosing, decides.
const RESULT_DAYS = 3650

describe('a first-release data dir (sqlite)', () => {
  let gw: TestGateway
  let dataDir: string
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'mg-first-release-'))
    const db = new Database(join(dataDir, 'multigrid.sqlite'), { create: true })
    db.exec(
      await Bun.file(
        join(import.meta.dir, '..', 'store', 'fixtures', 'sqlite-first-release.sql'),
      ).text(),
    )
    db.close()
    gw = await startTestGateway({
      env: { MULTIGRID_DATA_DIR: dataDir, MULTIGRID_RESULT_RETENTION_DAYS: String(RESULT_DAYS) },
    })
  })
  afterAll(async () => {
    await gw.stop()
  })

  test('opens in place with its records, gains purged_at and the later tables, and retention then purges its old results', async () => {
    const batch = async (id: string) =>
      (await (await gw.request(`/v1/batches/${id}`, KEY)).json()) as Record<string, unknown>
    expect(await batch('batch_old')).toMatchObject({
      id: 'batch_old',
      status: 'completed',
      request_counts: { succeeded: 2 },
    })
    const before = await gw.request('/v1/batches/batch_old/results', KEY)
    expect(before.status).toBe(200)
    expect(
      (await before.text())
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line).custom_id),
    ).toEqual(['old-1', 'old-2'])
    const account = (await (await gw.admin('/accounts/acct_first')).json()) as Record<
      string,
      unknown
    >
    expect(account).toMatchObject({ id: 'acct_first', balance_usd: '9.990000' })

    // The schema was brought forward in place (a look with a connection of our own).
    const db = new Database(join(dataDir, 'multigrid.sqlite'), { readonly: true })
    try {
      expect(
        db.query("SELECT name FROM pragma_table_info('batches') WHERE name = 'purged_at'").get(),
      ).toEqual({ name: 'purged_at' })
      expect(db.query('SELECT count(*) AS n FROM schema_migrations').get()).toEqual({
        n: readSqliteMigrations().length,
      })
    } finally {
      db.close()
    }

    // Past batch_old's retention, not batch_new's.
    const report = await gw.janitor.runOnce(T + (RESULT_DAYS + 1) * DAY)
    expect(report.purgedBatches).toEqual(['batch_old'])
    const after = await gw.request('/v1/batches/batch_old/results', KEY)
    expect(after.status).toBe(410)
    expect(((await after.json()) as { error: { code: string } }).error.code).toBe('results_expired')
    expect(await batch('batch_old')).toMatchObject({
      status: 'completed',
      request_counts: { succeeded: 2 },
    })
    expect((await gw.request('/v1/batches/batch_new/results', KEY)).status).toBe(200)

    // The files table the first release did not have takes uploads.
    const form = new FormData()
    form.set('purpose', 'batch')
    form.set('file', new Blob(['{"custom_id":"x"}\n']), 'in.jsonl')
    expect((await gw.request('/openai/v1/files', KEY, { method: 'POST', body: form })).status).toBe(
      200,
    )
  })
})
