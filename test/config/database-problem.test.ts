/**
 * Start-up's one line for a store it cannot open (src/cli/start-up-notes.ts): only for what the
 * connection was refused for; any other PostgreSQL error (a failed migration) keeps its stack.
 */
import { expect, test } from 'bun:test'
import { databaseProblem } from '../../src/cli/start-up-notes.ts'

const config = { databaseUrl: 'postgres://mg:SECRETPW@db.internal:5433/multigrid' }
const postgresError = (code: string, message: string) =>
  Object.assign(new Error(message), { name: 'PostgresError', code })

test('a refused connection, role or database is one line with the fix, never the password', () => {
  const role = databaseProblem(postgresError('28P01', 'password authentication failed'), config)
  expect(role).toBe(
    'DATABASE_URL: PostgreSQL at db.internal:5433 refused the connection: password authentication failed (28P01); set the user and password PostgreSQL has, in DATABASE_URL',
  )
  expect(
    databaseProblem(postgresError('3D000', 'database "multigrid" does not exist'), config),
  ).toContain('create it (createdb multigrid)')
  expect(databaseProblem(postgresError('53300', 'too many connections'), config)).toContain(
    'refused the connection',
  )
  const unreachable = databaseProblem(
    Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
    config,
  )
  expect(unreachable).toContain('cannot reach PostgreSQL at db.internal:5433 (ECONNREFUSED)')
  for (const said of [role, unreachable]) expect(said).not.toContain('SECRETPW')
})

test('any other PostgreSQL error, or no DATABASE_URL, is not such a problem', () => {
  expect(
    databaseProblem(postgresError('42P07', 'relation "lines" already exists'), config),
  ).toBeNull()
  expect(databaseProblem(postgresError('42501', 'permission denied for table'), config)).toBeNull()
  expect(databaseProblem(postgresError('28P01', 'x'), { databaseUrl: null })).toBeNull()
})
