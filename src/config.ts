/**
 * Configuration: the environment and the providers file, read once into one frozen, validated
 * object. Nothing else in the project reads `process.env`.
 */
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { z } from 'zod'
import {
  catalogSchema,
  checkCatalog,
  withBillableRates,
  type CatalogFile,
} from './catalog/catalog-file.ts'
import { withLanes } from './catalog/lanes.ts'
import { editDistance } from './catalog/near-model-names.ts'
import { describeZodIssue, joinPath } from './schemas/describe-zod-issue.ts'
import { otlpFromEnv } from './telemetry/otlp-env.ts'

const DEFAULT_CATALOG = resolve(import.meta.dir, '../providers/catalog.default.json')

/** A whole number from the environment, refused in words a person reads ("must be …"). */
const intFrom = (min: number, max: number, fallback: number) => {
  const rule = `must be a whole number from ${min} to ${max} in decimal digits`
  // Decimal digits only. Set but empty (a compose file's "${VAR}" of an unset VAR) is refused,
  // not read as 0; so are the other forms Number() reads, "0x50" (80) or "1e3", which a person
  // who wrote them rarely meant.
  const digitsOnly = (value: unknown) =>
    typeof value === 'string' && !/^\s*\d+\s*$/.test(value) ? Number.NaN : value
  return z
    .preprocess(
      digitsOnly,
      z.coerce
        .number({ error: rule })
        .int({ error: rule })
        .min(min, { error: rule })
        .max(max, { error: rule }),
    )
    .default(fallback)
}

const envSchema = z.object({
  PORT: intFrom(0, 65535, 8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  MULTIGRID_DATA_DIR: z.string().min(1).default('./data'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must start with postgres:// or postgresql://')
    .optional(),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must start with redis:// or rediss://')
    .optional(),
  /** Prefix of the fleet's coordination keys in Redis, so several fleets can share one Redis. */
  MULTIGRID_REDIS_PREFIX: z
    .string()
    .regex(/^[\w:.-]{1,64}$/, 'letters, digits and _ : . - only')
    .default('mg:'),
  MULTIGRID_CONFIG: z.string().min(1).optional(),
  MULTIGRID_ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  /** When set, GET /metrics needs it as a bearer token; unset, /metrics is open (docs/operations.md). */
  MULTIGRID_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  MULTIGRID_MAX_BODY_BYTES: intFrom(1, 1 << 30, 16 * 1024 * 1024),
  MULTIGRID_MAX_LINES: intFrom(1, 1_000_000, 50_000),
  MULTIGRID_MAX_CUSTOM_ID: intFrom(1, 4096, 128),
  // 2 ** 31, not 1 << 31: the shift is a negative 32-bit int, which refused every setting.
  MULTIGRID_MAX_FILE_BYTES: intFrom(1, 2 ** 31, 200 * 1000 * 1000),
  /**
   * Body of one live chat or embeddings call. 8 MiB holds one image at Anthropic's 5 MB cap as
   * base64 (6.7 MB) with its prompt; each call in flight holds its body several times over
   * (bytes, parsed, sent upstream), so this bounds a live call's memory too.
   */
  MULTIGRID_MAX_LIVE_BODY_BYTES: intFrom(1024, 1 << 30, 8 * 1024 * 1024),
  MULTIGRID_DEFAULT_MAX_OPEN_BATCHES: intFrom(1, 100_000, 10),
  MULTIGRID_DEFAULT_RATE_LIMIT: intFrom(1, 10_000_000, 600),
  /** Per-account file quotas (docs/money-and-limits.md) for accounts without their own. */
  MULTIGRID_DEFAULT_MAX_FILES: intFrom(0, 2_147_483_647, 500),
  MULTIGRID_DEFAULT_MAX_STORED_BYTES: intFrom(0, Number.MAX_SAFE_INTEGER, 20 * 1000 ** 3),
  /** How long a dashboard sign-in lasts (the cookie also ends when the browser closes). */
  MULTIGRID_SESSION_HOURS: intFrom(1, 24 * 365, 12),
  /** How long a claimed line stays leased without a heartbeat before another instance may take it. */
  MULTIGRID_LEASE_SECONDS: intFrom(1, 3600, 30),
  /** On SIGTERM, how long lines upstream may take to finish before the rest are handed back. */
  MULTIGRID_DRAIN_MS: intFrom(0, 600_000, 10_000),
  /** Poll interval of the dispatcher when no nudge arrives. */
  MULTIGRID_POLL_MS: intFrom(10, 60_000, 500),
  /**
   * PostgreSQL connections of each instance's dispatch thread (docs/scale.md): one, because the
   * same claims and settlements cost the server more CPU a line over more backends.
   */
  MULTIGRID_DISPATCH_CONNECTIONS: intFrom(1, 64, 1),
  /**
   * How often each instance looks for batches waiting for credit (docs/open-models.md) when no deposit's
   * nudge arrives: a deposit made where no nudge is sent is noticed within this.
   */
  MULTIGRID_CREDIT_WAIT_POLL_MS: intFrom(100, 60_000, 1_000),
  /** Attempts per line for retryable upstream failures before it fails `upstream_error`. */
  MULTIGRID_MAX_ATTEMPTS: intFrom(1, 100, 8),
  /**
   * The spill planner's safety margin (docs/routing.md): the cheaper offerings are filled as far as they
   * can finish a batch by deadline_at minus this share of its window. A share ("0.1") or a
   * percentage ("10%"), below one half.
   */
  MULTIGRID_SPILL_MARGIN: z
    .string()
    .regex(/^(0(\.\d+)?|\d+(\.\d+)?%)$/, 'must be a share such as 0.1 or a percentage such as 10%')
    .transform((text) => (text.endsWith('%') ? Number(text.slice(0, -1)) / 100 : Number(text)))
    .refine((share) => share < 0.5, 'must be below one half of the window (0.5, 50%)')
    .default(0.1),
  /** Set to 0 to run the HTTP API without a dispatcher (for a read-only replica). */
  MULTIGRID_DISPATCH: z.enum(['0', '1']).default('1'),
  MULTIGRID_RESULT_RETENTION_DAYS: intFrom(1, 3650, 30),
  MULTIGRID_FILE_RETENTION_DAYS: intFrom(1, 3650, 7),
  MULTIGRID_JANITOR_INTERVAL_S: intFrom(1, 86_400, 600),
  /**
   * Live calls (docs/live.md): how often the charges of answered calls are written, in one group. At
   * most 5 s: idle leases go back at a write, and idle (≤ 25 s) + interval must stay within 30 s.
   */
  MULTIGRID_LIVE_CHARGE_INTERVAL_MS: intFrom(20, 5_000, 500),
  /** An instance's live credit lease counts for nothing this long after its last renewal. */
  MULTIGRID_LIVE_LEASE_TTL_MS: intFrom(1_000, 600_000, 15_000),
  /** A lease is handed back once its account has had no live call on the instance this long. */
  MULTIGRID_LIVE_LEASE_IDLE_MS: intFrom(100, 25_000, 5_000),
  /** A lease top-up asks for this many of the call's ceiling (at most half what is available). */
  MULTIGRID_LIVE_LEASE_BLOCK: intFrom(1, 100_000, 32),
  /** How long a key lookup is served from memory; revocation reaches every instance within it. */
  MULTIGRID_KEY_CACHE_MS: intFrom(0, 1_000, 1_000),
  /** A progress stream (docs/events-and-webhooks.md) writes a comment this often. */
  MULTIGRID_EVENTS_KEEPALIVE_MS: intFrom(50, 60_000, 15_000),
  /**
   * A progress stream re-reads its batch this often without a change signal: the signal is only
   * a shortcut (a NOTIFY lost while PostgreSQL restarts, a change no signal announces).
   */
  MULTIGRID_EVENTS_POLL_MS: intFrom(50, 60_000, 5_000),
  /**
   * Webhooks (docs/events-and-webhooks.md) may also point at loopback and private addresses, by http:// too: for a
   * receiver on the gateway's own network. Off, a webhook cannot be used to reach that network.
   */
  MULTIGRID_WEBHOOK_ALLOW_PRIVATE: z.enum(['true', 'false']).default('false'),
  /** An attempt without a 2xx answer by then has failed (docs/events-and-webhooks.md: 15 s). */
  MULTIGRID_WEBHOOK_TIMEOUT_MS: intFrom(100, 60_000, 15_000),
  /** The first retry's delay; each one after doubles it, up to an hour, for 24 hours. */
  MULTIGRID_WEBHOOK_RETRY_BASE_MS: intFrom(10, 3_600_000, 5_000),
  /** A webhook whose every attempt failed for this long is disabled (docs/webhooks-and-streams.md: 24 h). */
  MULTIGRID_WEBHOOK_DISABLE_AFTER_MS: intFrom(1_000, 30 * 86_400_000, 86_400_000),
  /** Progress streams open at once per key (docs/webhooks-and-streams.md); one more is 429 limit_exceeded. */
  MULTIGRID_MAX_STREAMS_PER_KEY: intFrom(1, 10_000, 20),
  /**
   * docs/structured-outputs.md: how long compiling a tenant's json_schema, or judging one answer against it, may
   * take on a schema thread. Past it the schema is refused (validation) or the answer ends
   * structured_output_unchecked, billed (result time), and the thread is replaced.
   */
  MULTIGRID_SCHEMA_CHECK_MS: intFrom(1, 60_000, 100),
  LOG_LEVEL: z.enum(['debug', 'info', 'warn', 'error', 'silent']).default('info'),
})

/** The configuration as loadConfig makes it: its shape is the object built there from `envSchema`. */
export type Config = ReturnType<typeof loadConfig>

/** A configuration problem; start-up prints `message` alone and exits. */
export class ConfigError extends Error {}

/**
 * A variable as a configuration error shows it: a secret's value never (a token, a key, a
 * password), a URL's with its password masked.
 */
function shown(name: string, value: string | undefined): string {
  if (/TOKEN|SECRET|PASSWORD|API_KEY/.test(name)) return `${name} (its value not shown)`
  if (value !== undefined && /_URL$/.test(name) && URL.canParse(value)) {
    const url = new URL(value)
    if (url.password) url.password = '***'
    return `${name}=${JSON.stringify(url.href)}`
  }
  if (/_URL$/.test(name)) return `${name} (its value not shown)`
  return `${name}=${JSON.stringify(value)}`
}

/** The project's clients' own variables (the `multigrid` CLI, a webhook receiver), not the gateway's. */
const CLIENT_VARIABLES = new Set(['MULTIGRID_URL', 'MULTIGRID_API_KEY', 'MULTIGRID_WEBHOOK_SECRET'])

/**
 * The MULTIGRID_ variables set that the gateway does not read. One a typo or two from a setting
 * is refused naming it: ignored, the setting's default would stay in force unseen (a retention
 * period, the metrics token). The others are returned, for a warning at start-up.
 */
function unknownVariables(env: Record<string, string | undefined>): string[] {
  const known = Object.keys(envSchema.shape)
  const unknown = Object.keys(env).filter(
    (name) =>
      name.startsWith('MULTIGRID_') && !(name in envSchema.shape) && !CLIENT_VARIABLES.has(name),
  )
  for (const name of unknown) {
    const meant = known.find((setting) => editDistance(name.toLowerCase(), setting, 2) <= 2)
    if (meant)
      throw new ConfigError(
        `unknown variable ${name}: the gateway has no such setting and would ignore it; did you mean ${meant}? Rename it, or remove it`,
      )
  }
  return unknown.sort()
}

/**
 * For each provider whose key variable is unset, a variable that is set under a name one or two
 * typos from it (`OPENAI_APIKEY` for `OPENAI_API_KEY`): the gateway would otherwise only say the
 * key is missing, while the person who set it sees it set. Other providers' key variables are
 * never taken for a typo.
 */
function providerKeyLookalikes(
  env: Record<string, string | undefined>,
  providers: Record<string, { api_key_env?: string }>,
  keys: Record<string, string | null>,
): Record<string, string> {
  const keyNames = new Set(Object.values(providers).map((p) => p.api_key_env))
  const found: Record<string, string> = {}
  for (const [name, provider] of Object.entries(providers)) {
    const wanted = provider.api_key_env
    if (!wanted || keys[name] !== null) continue
    const near = Object.keys(env).find(
      (set) => !keyNames.has(set) && env[set] && editDistance(set.toLowerCase(), wanted, 2) <= 2,
    )
    if (near) found[name] = near
  }
  return found
}

/** Reads and validates the configuration. Throws ConfigError naming the variable or file path. */
export function loadConfig(env: Record<string, string | undefined> = process.env) {
  const unknown = unknownVariables(env)
  const parsed = envSchema.safeParse(env)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    const name = String(issue.path[0])
    throw new ConfigError(`invalid ${shown(name, env[name])}: ${issue.message}`)
  }
  const e = parsed.data
  const otlp = otlpFromEnv(env)
  if (typeof otlp === 'string') throw new ConfigError(otlp)
  const catalogPath = resolve(e.MULTIGRID_CONFIG ?? DEFAULT_CATALOG)
  const catalog = loadCatalog(catalogPath)
  const providerKeys: Record<string, string | null> = {}
  for (const [name, provider] of Object.entries(catalog.providers)) {
    const value = provider.api_key_env ? env[provider.api_key_env] : undefined
    providerKeys[name] = value && value.length > 0 ? value : null
  }
  const keyLookalikes = providerKeyLookalikes(env, catalog.providers, providerKeys)
  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    dataDir: resolve(e.MULTIGRID_DATA_DIR),
    databaseUrl: e.DATABASE_URL ?? null,
    dispatchConnections: e.MULTIGRID_DISPATCH_CONNECTIONS,
    redisUrl: e.REDIS_URL ?? null,
    redisPrefix: e.MULTIGRID_REDIS_PREFIX,
    adminToken: e.MULTIGRID_ADMIN_TOKEN ?? null,
    metricsToken: e.MULTIGRID_METRICS_TOKEN ?? null,
    catalogPath,
    catalog,
    /** Provider name → its API key from the environment, or null when unset / not needed. */
    providerKeys,
    /** Provider name → a variable set under a name a typo from its unset `api_key_env`. */
    keyLookalikes,
    limits: {
      maxBodyBytes: e.MULTIGRID_MAX_BODY_BYTES,
      maxLines: e.MULTIGRID_MAX_LINES,
      maxCustomIdLength: e.MULTIGRID_MAX_CUSTOM_ID,
      maxFileBytes: e.MULTIGRID_MAX_FILE_BYTES,
      maxLiveBodyBytes: e.MULTIGRID_MAX_LIVE_BODY_BYTES,
      defaultMaxOpenBatches: e.MULTIGRID_DEFAULT_MAX_OPEN_BATCHES,
      defaultRateLimitPerMinute: e.MULTIGRID_DEFAULT_RATE_LIMIT,
      defaultMaxFiles: e.MULTIGRID_DEFAULT_MAX_FILES,
      defaultMaxStoredBytes: e.MULTIGRID_DEFAULT_MAX_STORED_BYTES,
    },
    sessionHours: e.MULTIGRID_SESSION_HOURS,
    dispatch: {
      enabled: e.MULTIGRID_DISPATCH === '1',
      leaseSeconds: e.MULTIGRID_LEASE_SECONDS,
      drainMs: e.MULTIGRID_DRAIN_MS,
      pollMs: e.MULTIGRID_POLL_MS,
      creditWaitPollMs: e.MULTIGRID_CREDIT_WAIT_POLL_MS,
      maxAttempts: e.MULTIGRID_MAX_ATTEMPTS,
      spillMargin: e.MULTIGRID_SPILL_MARGIN,
    },
    retention: {
      resultDays: e.MULTIGRID_RESULT_RETENTION_DAYS,
      fileDays: e.MULTIGRID_FILE_RETENTION_DAYS,
      intervalMs: e.MULTIGRID_JANITOR_INTERVAL_S * 1000,
    },
    live: {
      chargeIntervalMs: e.MULTIGRID_LIVE_CHARGE_INTERVAL_MS,
      leaseTtlMs: e.MULTIGRID_LIVE_LEASE_TTL_MS,
      leaseIdleMs: e.MULTIGRID_LIVE_LEASE_IDLE_MS,
      leaseBlockCalls: e.MULTIGRID_LIVE_LEASE_BLOCK,
      keyCacheMs: e.MULTIGRID_KEY_CACHE_MS,
    },
    events: {
      keepAliveMs: e.MULTIGRID_EVENTS_KEEPALIVE_MS,
      pollMs: e.MULTIGRID_EVENTS_POLL_MS,
      maxStreamsPerKey: e.MULTIGRID_MAX_STREAMS_PER_KEY,
    },
    webhooks: {
      allowPrivate: e.MULTIGRID_WEBHOOK_ALLOW_PRIVATE === 'true',
      timeoutMs: e.MULTIGRID_WEBHOOK_TIMEOUT_MS,
      retryBaseMs: e.MULTIGRID_WEBHOOK_RETRY_BASE_MS,
      disableAfterMs: e.MULTIGRID_WEBHOOK_DISABLE_AFTER_MS,
    },
    schemaCheckMs: e.MULTIGRID_SCHEMA_CHECK_MS,
    logLevel: e.LOG_LEVEL,
    /** Whether npm started this process (npm start sets npm_lifecycle_event): the start-up hints' commands. */
    startedByNpm: env.npm_lifecycle_event !== undefined,
    otlp,
    /** MULTIGRID_ variables set that nothing reads (none a typo of a setting): warned of at start-up. */
    unknownVariables: unknown,
  })
}

/** A place in the catalog file as checkCatalog names one: `models[1].offerings[0].lane`. */
const placeIn = (path: readonly PropertyKey[]) =>
  path
    .map((key, i) =>
      typeof key === 'number' ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`,
    )
    .join('')

function loadCatalog(path: string): CatalogFile {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch {
    throw new ConfigError(`MULTIGRID_CONFIG: cannot read ${path}`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (error) {
    throw new ConfigError(`${path}: not valid JSON (${(error as Error).message})`)
  }
  const parsed = catalogSchema.safeParse(json, { reportInput: true })
  if (!parsed.success) {
    // In words with a fix ("is required; add …"), not zod's ("expected string, received undefined").
    const issue = parsed.error.issues[0]
    const { message, fix } = describeZodIssue(issue, '', 'the catalog')
    const place = placeIn(issue.path)
    const fixHere = place ? fix.replaceAll(joinPath(issue.path), place) : fix
    throw new ConfigError(`${path}: ${place || '(root)'}: ${message}; ${fixHere}`)
  }
  const problems = checkCatalog(parsed.data)
  if (problems.length > 0) throw new ConfigError(`${path}: ${problems[0]}`)
  return withLanes(withBillableRates(parsed.data))
}

/**
 * The configuration of this process's environment with some variables set or removed (undefined)
 * on top: for a program that composes its own set-up, as `npm run demo` does.
 */
export function loadConfigWith(overrides: Record<string, string | undefined>) {
  return loadConfig({ ...process.env, ...overrides })
}
