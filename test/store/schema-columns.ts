/**
 * The tables and columns a store's database has, read from the database itself (SQLite's
 * sqlite_master and table_info, PostgreSQL's information_schema), with each column's type
 * reduced to what both dialects can agree on: integer, text (money is numeric in PostgreSQL and
 * canonical decimal TEXT in SQLite; JSON is jsonb in one and TEXT in the other), bytes, time.
 */
import type { Database } from 'bun:sqlite'
import type postgres from 'postgres'

/** table → column → broad type. */
export type Columns = Record<string, Record<string, string>>

const SQLITE_TYPES: Record<string, string> = { INTEGER: 'integer', TEXT: 'text', BLOB: 'bytes' }
const POSTGRES_TYPES: Record<string, string> = {
  smallint: 'integer',
  integer: 'integer',
  bigint: 'integer',
  // SQLite keeps a flag as 0 or 1.
  boolean: 'integer',
  text: 'text',
  numeric: 'text',
  jsonb: 'text',
  bytea: 'bytes',
  'timestamp with time zone': 'time',
}

export function sqliteColumns(db: Database): Columns {
  const tables = db
    .query<{ name: string }, []>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
    )
    .all()
  const columns: Columns = {}
  for (const { name } of tables) {
    const info = db
      .query<{ name: string; type: string }, [string]>(
        'SELECT name, type FROM pragma_table_info(?)',
      )
      .all(name)
    columns[name] = Object.fromEntries(
      info.map((c) => [c.name, SQLITE_TYPES[c.type.toUpperCase()] ?? `sqlite ${c.type}`]),
    )
  }
  return columns
}

export async function postgresColumns(sql: postgres.Sql, schema: string): Promise<Columns> {
  const rows = await sql<{ table_name: string; column_name: string; data_type: string }[]>`
    SELECT table_name, column_name, data_type FROM information_schema.columns
    WHERE table_schema = ${schema}`
  const columns: Columns = {}
  for (const row of rows) {
    columns[row.table_name] ??= {}
    columns[row.table_name]![row.column_name] =
      POSTGRES_TYPES[row.data_type] ?? `postgres ${row.data_type}`
  }
  return columns
}

/** The same, with tables and columns in name order, so toEqual's diff reads well. */
export function sorted(columns: Columns): Columns {
  return Object.fromEntries(
    Object.keys(columns)
      .sort()
      .map((table) => [
        table,
        Object.fromEntries(Object.entries(columns[table]!).sort(([a], [b]) => a.localeCompare(b))),
      ]),
  )
}
