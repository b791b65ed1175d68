/**
 * The connection a role module is given (src/store/<role>/): the embedded database's statements
 * and transactions, or a PostgreSQL pool (or a transaction of it). Role modules see only this,
 * never a store class, so each can be opened, tested and read on its own; the store classes
 * (sqlite/sqlite-store.ts, postgres/postgres-store.ts) compose them.
 */
import type { Database } from 'bun:sqlite'
import type postgres from 'postgres'

/** bun:sqlite, narrowed to what a role runs: prepared statements and transactions. */
export type SqliteConnection = Pick<Database, 'query' | 'transaction'>

/** A PostgreSQL pool: tagged-template queries and `begin` for transactions. */
export type PostgresPool = postgres.Sql

/** A PostgreSQL pool or a transaction of it: a statement that runs inside the caller's. */
export type PostgresQueries = postgres.ISql

/** A row as either driver returns it; the column names are the same in both dialects. */
export type Row = Record<string, any>

/** A statement on the embedded database, its rows typed loosely (rows are mapped by rows files). */
export const sqliteQuery = (db: SqliteConnection, sql: string) => db.query<Row, any[]>(sql)

/** A nullable number column as a number or null (bigint and numeric columns arrive as strings). */
export const num = (value: unknown) =>
  value === null || value === undefined ? null : Number(value)
