/**
 * The embedded store's forward-only migrations: every `migrations/NNNN_name.sql` in number order,
 * each once, recorded in `schema_migrations`, with the numbers and names of PostgreSQL's (sql/).
 * One IMMEDIATE transaction at open: a second process opening the same file (the admin CLI
 * beside a running gateway) waits for it, then finds the files recorded and applies nothing.
 *
 * Data dirs made before migrations were recorded have no `schema_migrations`. Their schema was
 * a hand-kept file applied with CREATE … IF NOT EXISTS at every open, so such a dir has the
 * tables and indexes of the last release that opened it but the columns of the one that made
 * it (a dir made before retention lacks batches.purged_at). For those, each migration whose
 * tables, indexes and columns are all there is recorded without running; any other is applied,
 * which its IF NOT EXISTS makes safe for what it finds already made. A migration that adds
 * columns adds nothing else, so it is either all there or not there at all.
 */
import type { Database } from 'bun:sqlite'
import { join } from 'node:path'
import { readMigrations, type Migration } from '../read-migrations.ts'

const MIGRATIONS_DIR = join(import.meta.dir, 'migrations')
/** The last migration whose tables the hand-kept schema had: later ones are never there before. */
const LAST_HAND_KEPT = 5

export function readSqliteMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readMigrations(dir)
}

/** Applies the migrations not yet recorded; returns the names of those it ran. */
export function migrateSqlite(db: Database, migrations = readSqliteMigrations()): string[] {
  return db
    .transaction(() => {
      const unrecorded = !hasTable(db, 'schema_migrations')
      const madeBefore = unrecorded && hasTable(db, 'accounts')
      db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        applied_at INTEGER NOT NULL
      )`)
      const done = new Set(
        db
          .query<{ version: number }, []>('SELECT version FROM schema_migrations')
          .all()
          .map((row) => row.version),
      )
      const record = db.query(
        'INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)',
      )
      const ran: string[] = []
      for (const migration of migrations) {
        if (done.has(migration.version)) continue
        if (!(
          madeBefore &&
          migration.version <= LAST_HAND_KEPT &&
          alreadyThere(db, migration.text)
        )) {
          const statements = withoutComments(migration.text).trim()
          // A file of comments only holds a number (0002: PostgreSQL's file content table).
          if (statements) db.exec(statements)
          ran.push(migration.name)
        }
        record.run(migration.version, migration.name, Math.floor(Date.now() / 1000))
      }
      return ran
    })
    .immediate()
}

function hasTable(db: Database, name: string): boolean {
  return (
    db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(name) !== null
  )
}

function hasObject(db: Database, type: 'table' | 'index', name: string): boolean {
  return (
    db.query('SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?').get(type, name) !== null
  )
}

function hasColumn(db: Database, table: string, column: string): boolean {
  const columns = db
    .query<{ name: string }, []>(`SELECT name FROM pragma_table_info('${table}')`)
    .all()
  return columns.some((row) => row.name === column)
}

const CREATES = /\bCREATE\s+(?:UNIQUE\s+)?(TABLE|INDEX)\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)/gi
const ADDS_COLUMN = /\bALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)/gi

/** Whether every table, index and column this migration makes is in the database already. */
function alreadyThere(db: Database, text: string): boolean {
  const sql = withoutComments(text)
  for (const [, type, name] of sql.matchAll(CREATES)) {
    if (!hasObject(db, type!.toLowerCase() as 'table' | 'index', name!)) return false
  }
  for (const [, table, column] of sql.matchAll(ADDS_COLUMN)) {
    if (!hasColumn(db, table!, column!)) return false
  }
  return true
}

function withoutComments(text: string): string {
  return text.replace(/--[^\n]*/g, '')
}
