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
 * handed out to pieces of work that land in any order, so 0014 may arrive before 0012 (each
 * store applies the migrations it has not recorded, by number, whatever came before).
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
    const before = index === 0 ? 0 : migrations[index - 1].version
    if (migration.version <= before) {
      throw new Error(`migration ${migration.name}: number ${migration.version} repeated`)
    }
  })
  return migrations
}
