/**
 * The embedded store's migrations (src/store/sqlite/migrate.ts): a new data dir gets them all,
 * once; a data dir made before migrations were recorded, from the hand-kept schema of its
 * release, is recognised and gets exactly what it lacks; a failing migration leaves nothing.
 */
import { Database } from 'bun:sqlite'
import { describe, expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { migrateSqlite, readSqliteMigrations } from '../../src/store/sqlite/migrate.ts'
import { openSqliteDatabase } from '../../src/store/sqlite/open-database.ts'
import { sorted, sqliteColumns } from './schema-columns.ts'

const FIXTURES = join(import.meta.dir, 'fixtures')
const FIRST_RELEASE = await Bun.file(join(FIXTURES, 'sqlite-first-release.sql')).text()
const HAND_KEPT_LAST = await Bun.file(join(FIXTURES, 'sqlite-hand-kept-last.sql')).text()
const ALL = readSqliteMigrations().map((m) => m.name)
/** The migrations made after the ones these fixtures know of: every old data dir gets them all. */
const AFTER_0005 = ALL.slice(5)

/** A database file made by running these SQL texts, as the release that wrote them did. */
function databaseFrom(...texts: string[]): Database {
  const db = openSqliteDatabase(
    join(mkdtempSync(join(tmpdir(), 'mg-migrate-')), 'multigrid.sqlite'),
  )
  for (const text of texts) db.exec(text)
  return db
}

const recorded = (db: Database) =>
  db
    .query<{ version: number; name: string }, []>(
      'SELECT version, name FROM schema_migrations ORDER BY version',
    )
    .all()

const freshColumns = () => {
  const db = databaseFrom()
  migrateSqlite(db)
  const columns = sorted(sqliteColumns(db))
  db.close()
  return columns
}

describe('sqlite migrations', () => {
  test('a new data dir gets every migration, recorded in order; opening it again applies nothing', () => {
    const db = databaseFrom()
    expect(migrateSqlite(db)).toEqual(ALL)
    expect(recorded(db)).toEqual(ALL.map((name) => ({ version: Number(name.slice(0, 4)), name })))
    expect(migrateSqlite(db)).toEqual([])
    expect(recorded(db)).toHaveLength(ALL.length)
    db.close()
  })

  test("a data dir made by the first release is brought forward to a new one's tables and columns, its rows kept", () => {
    const db = databaseFrom(FIRST_RELEASE)
    // It has accounts but no files table, no batches.purged_at and no record: 0001 is applied
    // again for `files` (IF NOT EXISTS keeps the rest), 0002 holds nothing to apply.
    expect(migrateSqlite(db)).toEqual([
      '0001_init.sql',
      '0003_retention.sql',
      '0004_live_credit.sql',
      '0005_file_quotas_sessions.sql',
      ...AFTER_0005,
    ])
    expect(recorded(db).map((row) => row.name)).toEqual(ALL)
    expect(sorted(sqliteColumns(db))).toEqual(freshColumns())
    expect(db.query('SELECT id, purged_at FROM batches ORDER BY id').all()).toEqual([
      { id: 'batch_new', purged_at: null },
      { id: 'batch_old', purged_at: null },
    ])
    expect(db.query('SELECT count(*) AS n FROM lines').get()).toEqual({ n: 4 })
    db.close()
  })

  test('a first-release data dir opened by the last hand-kept release (its tables, the old columns) gets the missing column', () => {
    // CREATE TABLE IF NOT EXISTS at every open gave it the newer tables but never purged_at:
    // the bug this fixes.
    const db = databaseFrom(FIRST_RELEASE, HAND_KEPT_LAST)
    expect(
      db.query("SELECT 1 FROM pragma_table_info('batches') WHERE name = 'purged_at'").get(),
    ).toBeNull()
    expect(migrateSqlite(db)).toEqual([
      '0003_retention.sql',
      '0004_live_credit.sql',
      '0005_file_quotas_sessions.sql',
      ...AFTER_0005,
    ])
    expect(sorted(sqliteColumns(db))).toEqual(freshColumns())
    db.close()
  })

  test('a data dir made by the last hand-kept release gets only the tables added since', () => {
    const db = databaseFrom(HAND_KEPT_LAST)
    expect(migrateSqlite(db)).toEqual([
      '0004_live_credit.sql',
      '0005_file_quotas_sessions.sql',
      ...AFTER_0005,
    ])
    expect(recorded(db).map((row) => row.name)).toEqual(ALL)
    expect(sorted(sqliteColumns(db))).toEqual(freshColumns())
    db.close()
  })

  test('batches stored before the lane flag count as having marked lines, so their lane lines are still found', () => {
    const db = databaseFrom()
    migrateSqlite(
      db,
      readSqliteMigrations().filter((m) => m.version <= 20),
    )
    db.exec(`INSERT INTO accounts (id, name, balance_usd, held_usd, max_open_batches, rate_limit_per_minute, created_at)
      VALUES ('acct', 'acct', '10', '0', 10, 600, 1795990000)`)
    db.exec(`INSERT INTO batches (id, account_id, endpoint, status, completion_window_hours, created_at,
        deadline_at, line_count, pending, cost_ceiling_usd, held_usd, source)
      VALUES ('batch_marked', 'acct', '/v1/chat/completions', 'in_progress', 24, 1795999000, 1796085400, 2, 2, '0.01', '0', 'native')`)
    db.exec(`INSERT INTO lines (batch_id, line_no, custom_id, input, batch_lane)
      VALUES ('batch_marked', 1, 'a', '{}', NULL), ('batch_marked', 2, 'b', '{}', 'm|openai')`)
    expect(migrateSqlite(db)).toEqual(ALL.filter((name) => Number(name.slice(0, 4)) > 20))
    // Nothing read to decide: the safe side, as a batch an older release admits gets too.
    expect(db.query('SELECT id, lane_lines FROM batches').all()).toEqual([
      { id: 'batch_marked', lane_lines: 1 },
    ])
    db.close()
  })

  test('a migration that fails leaves the data dir as it was: nothing of the run made, nothing recorded', () => {
    const db = databaseFrom()
    const migrations = [
      { version: 1, name: '0001_first.sql', text: 'CREATE TABLE first (id INTEGER PRIMARY KEY);' },
      {
        version: 2,
        name: '0002_broken.sql',
        text: 'CREATE TABLE second (id INTEGER PRIMARY KEY); INSERT INTO nowhere VALUES (1);',
      },
    ]
    expect(() => migrateSqlite(db, migrations)).toThrow(/nowhere/)
    expect(db.query("SELECT name FROM sqlite_master WHERE type = 'table'").all()).toEqual([])
    db.close()
  })
})
