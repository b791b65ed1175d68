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
 * The migrations in `dir`, in order; a repeated number is an error. Numbers are reserved per
 * change as work is planned, so a branch may hold a later number before the earlier ones land
 * (0016 before 0012): a gap is allowed, and each file is applied once whatever its neighbours.
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
    const before = migrations[index - 1]
    if (migration.version < 1 || (before && migration.version <= before.version)) {
      throw new Error(`migration ${migration.name}: its number is used twice (no repeats)`)
    }
  })
  return migrations
}
