/**
 * What start-up tells the person who started the gateway: the providers it has no key for (and
 * the models left with nothing to run on), how to try everything offline, and how to make the
 * first account and key on the store this gateway uses.
 */
import { basename, resolve } from 'node:path'
import type { Config } from '../config.ts'

/** Providers whose `api_key_env` is unset, and the models none of whose offerings can run. */
export interface MissingKeys {
  /** `lookalike`: a variable set under a name a typo from `env` (config.ts), if any. */
  providers: { name: string; env: string; lookalike?: string }[]
  modelsWithoutOffering: string[]
}

export function missingKeys(config: Config): MissingKeys {
  const providers = Object.entries(config.catalog.providers)
    .filter(([name, p]) => p.api_key_env && config.providerKeys[name] === null)
    .map(([name, p]) => {
      const lookalike = config.keyLookalikes[name]
      return { name, env: p.api_key_env!, ...(lookalike ? { lookalike } : {}) }
    })
  const without = new Set(providers.map((p) => p.name))
  const modelsWithoutOffering = config.catalog.models
    .filter((m) => m.offerings.length > 0 && m.offerings.every((o) => without.has(o.provider)))
    .map((m) => m.id)
  return { providers, modelsWithoutOffering }
}

export const OFFLINE_HINT =
  'To try everything offline, with no provider key: `npm run demo` starts the upstream simulator and a gateway on it, with an account, credit and a key printed ready to use.'

/** Lines for stderr when some providers have no key; none when every provider can be called. */
export function missingKeysNote(missing: MissingKeys): string[] {
  if (missing.providers.length === 0) return []
  const none = missing.modelsWithoutOffering.length
  return [
    `multigrid: no API key for ${missing.providers.map(needsKey).join(', ')}.`,
    none > 0
      ? `  ${none} model${none === 1 ? ' has' : 's have'} nothing to run on until one is set: ${missing.modelsWithoutOffering.join(', ')}`
      : '  every model still has an offering with a key.',
    `  ${OFFLINE_HINT}`,
  ]
}

const needsKey = (p: MissingKeys['providers'][number]) =>
  p.lookalike
    ? `${p.name} (set ${p.env}; ${p.lookalike} is set, which the gateway does not read: rename it to ${p.env})`
    : `${p.name} (set ${p.env})`

/**
 * The CLI reads the store from its own environment: the hint names the gateway's data directory
 * (or its DATABASE_URL) so that the account lands in the store this gateway serves.
 */
export function storeEnvPrefix(config: Config): string {
  if (config.databaseUrl) return 'DATABASE_URL="<the same as the gateway\'s>" '
  if (config.dataDir === resolve('data')) return ''
  return `MULTIGRID_DATA_DIR=${shellQuote(config.dataDir)} `
}

/**
 * How to run the admin CLI where the gateway was started as it was: `npm run mg --` under npm
 * (npm start); else as Bun was run, `bun` where it is on the PATH (the Docker image, which has no
 * npm), `npx bun` where it is the npm package's binary.
 */
export function adminCommand(started: { byNpm: boolean; bunPath: string }): string {
  if (started.byNpm) return 'npm run mg --'
  return basename(started.bunPath) === 'bun' ? 'bun src/cli/admin.ts' : 'npx bun src/cli/admin.ts'
}

export function firstKeyNote(config: Config, port: number, mg: string): string[] {
  const env = storeEnvPrefix(config)
  return [
    `multigrid: listening on port ${port}; there is no account yet. Make one with credit, then a key for it:`,
    `  ${env}${mg} accounts create acme --credit 10`,
    `  ${env}${mg} keys create <the account id it printed>`,
    '(the key is shown once; send it as "Authorization: Bearer <key>")',
  ]
}

const shellQuote = (text: string) =>
  /^[\w./:@%+=-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`

/**
 * What went wrong with the data directory, in one line naming the variable, when `error` is the
 * file system refusing it (a path that cannot be made, a file where a directory belongs, no
 * permission); null for anything else.
 */
export function dataDirProblem(error: unknown, config: Pick<Config, 'dataDir'>): string | null {
  const { code, path } = (error ?? {}) as { code?: unknown; path?: unknown }
  const refusals = ['ENOENT', 'ENOTDIR', 'EEXIST', 'EACCES', 'EPERM', 'EROFS']
  if (typeof code !== 'string' || !refusals.includes(code)) return null
  if (typeof path !== 'string' || !path.startsWith(config.dataDir)) return null
  return `MULTIGRID_DATA_DIR: cannot use ${config.dataDir} for the store (${code} at ${path}); set MULTIGRID_DATA_DIR to a directory this user can create and write, such as ./data`
}

/** The connection errors that mean PostgreSQL could not be reached at all. */
const UNREACHABLE = [
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ECONNRESET',
  'CONNECT_TIMEOUT',
]

/**
 * A store that could not be opened for a reason DATABASE_URL names (the server down or elsewhere,
 * a database or role it does not have), in one line: where, what, what to do. Never the URL's
 * password. null: not such a problem.
 */
export function databaseProblem(
  error: unknown,
  config: Pick<Config, 'databaseUrl'>,
): string | null {
  if (!config.databaseUrl) return null
  const url = URL.parse(config.databaseUrl)
  const where = url ? `${url.hostname}:${url.port || 5432}` : 'its address'
  const { code, name, message } = (error ?? {}) as {
    code?: unknown
    name?: unknown
    message?: unknown
  }
  if (typeof code === 'string' && UNREACHABLE.includes(code))
    return `DATABASE_URL: cannot reach PostgreSQL at ${where} (${code}); start it, or set DATABASE_URL to where it listens, such as postgres://user:password@host:5432/multigrid`
  // Only what the connection itself was refused for (SQLSTATE class 08, a role or password, a
  // database, a server starting or full); a failed migration and the like keep their stack.
  const refusedConnection =
    typeof code === 'string' &&
    (code.startsWith('08') || ['28000', '28P01', '3D000', '57P03', '53300'].includes(code))
  if (name !== 'PostgresError' || typeof message !== 'string' || !refusedConnection) return null
  const database = url?.pathname.slice(1) || 'the database'
  const fix =
    code === '3D000'
      ? `create it (createdb ${database}), or name one that exists in DATABASE_URL`
      : code === '28000' || code === '28P01'
        ? 'set the user and password PostgreSQL has, in DATABASE_URL'
        : 'check the address, user and database in DATABASE_URL'
  return `DATABASE_URL: PostgreSQL at ${where} refused the connection: ${message} (${String(code)}); ${fix}`
}

/** An address the server cannot listen on (not this machine's, or not an address): HOST names it. */
export function listenProblem(
  error: unknown,
  config: Pick<Config, 'host' | 'port'>,
): string | null {
  const { code, syscall } = (error ?? {}) as { code?: unknown; syscall?: unknown }
  if (
    (code !== 'EINVAL' && code !== 'EADDRNOTAVAIL') ||
    (syscall !== undefined && syscall !== 'listen')
  )
    return null
  return `HOST: cannot listen on ${config.host} port ${config.port} (${code}); set HOST to an address of this machine, such as 0.0.0.0 (every interface) or 127.0.0.1`
}
