/**
 * Both stores' migrations are numbered files, `NNNN_name.sql`, applied in number order, each once,
 * and recorded in a `schema_migrations` table: sql/ for PostgreSQL, src/store/sqlite/migrations/
 * for SQLite, with the same numbers and names (test/store/schema-parity.test.ts checks it).
 */
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'

const FILE_NAME = /^(\d{4})_[\w-]+\.sql$/

export interface Migration {
  version: number
  name: string
  text: string
}

/**
 * The migrations in `dir`, in order; a repeated number is an error. A gap is not: numbers are
 * handed out to work in progress side by side, and each migration is recorded by its own number,
 * so one that lands later is still applied.
 */
export function readMigrations(dir: string): Migration[] {
  const migrations = readdirSync(dir)
    .filter((name) => FILE_NAME.test(name))
    .sort()
    .map((name) => ({
      version: Number(FILE_NAME.exec(name)![1]),
      name,
      text: readFileSync(join(dir, name), 'utf8'),
    }))
  migrations.forEach((migration, index) => {
    const previous = index === 0 ? 0 : migrations[index - 1].version
    if (migration.version <= previous || migration.version < 1) {
      throw new Error(
        `migration ${migration.name}: its number must be above ${previous} (no repeats)`,
      )
    }
  })
  return migrations
}
