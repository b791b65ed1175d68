/**
 * Forward-only migrations, as graphile-worker applies them: every `sql/NNNN_name.sql` file in
 * number order, each once, recorded in `schema_migrations`. The whole run holds a transaction-
 * scoped advisory lock, so instances starting together apply each file exactly once.
 */
import { join } from 'node:path'
import type { Sql } from 'postgres'
import { readMigrations as readMigrationsIn, type Migration } from '../read-migrations.ts'

export type { Migration }

/** `sql/` at the repository root, found from this file, so any working directory works. */
const MIGRATIONS_DIR = join(import.meta.dir, '..', '..', '..', 'sql')

export function readMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readMigrationsIn(dir)
}

/**
 * Applies the migrations not yet recorded, in `schema` when given (created if missing; the
 * connection's search_path must name it too, see createPostgresStore). Returns the names applied.
 */
export async function migrate(
  sql: Sql,
  options: { schema?: string; migrations?: Migration[] } = {},
): Promise<string[]> {
  const migrations = options.migrations ?? readMigrations()
  const schema = options.schema ?? null
  return sql.begin(async (tx) => {
    // One lock per schema: test files migrating their own schemas do not wait for each other.
    await tx`SELECT pg_advisory_xact_lock(hashtext(${`multigrid.migrate:${schema ?? ''}`}))`
    if (schema) {
      await tx`CREATE SCHEMA IF NOT EXISTS ${tx(schema)}`
      await tx`SELECT set_config('search_path', quote_ident(${schema}), true)`
    }
    await tx`
      CREATE TABLE IF NOT EXISTS schema_migrations (
        version int PRIMARY KEY,
        name text NOT NULL,
        applied_at timestamptz NOT NULL DEFAULT now()
      )`
    const done = new Set(
      (await tx`SELECT version FROM schema_migrations`).map((row) => Number(row.version)),
    )
    const applied: string[] = []
    for (const migration of migrations) {
      if (done.has(migration.version)) continue
      await tx.unsafe(migration.text)
      await tx`INSERT INTO schema_migrations (version, name)
               VALUES (${migration.version}, ${migration.name})`
      applied.push(migration.name)
    }
    return applied
  })
}
