/** Configuration: defaults, and one clear message naming the variable or the file path. */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ConfigError, loadConfig } from '../../src/config.ts'
import { writeCatalog } from '../helpers/catalog.ts'
import { TEST_DATABASE_URL } from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess } from '../helpers/process-gateway.ts'

const root = join(import.meta.dir, '../..')

describe('loadConfig', () => {
  test('defaults: port 8080, SQLite under ./data, the shipped catalog', () => {
    const config = loadConfig({})
    expect(config.port).toBe(8080)
    expect(config.databaseUrl).toBeNull()
    expect(config.adminToken).toBeNull()
    expect(config.dataDir.endsWith('/data')).toBe(true)
    expect(config.limits).toMatchObject({
      maxBodyBytes: 16 * 1024 * 1024,
      maxLines: 50_000,
      maxCustomIdLength: 128,
    })
    expect(config.catalog.prices_read_on).toMatch(/^\d{4}-\d{2}-\d{2}$/)
    expect(
      config.catalog.models.find((m) => m.id === 'openai/gpt-5-nano')?.offerings[0],
    ).toMatchObject({
      input_usd_per_mtok: '0.05',
      output_usd_per_mtok: '0.40',
    })
    expect(config.providerKeys.openai).toBeNull()
    expect(config.live).toEqual({
      chargeIntervalMs: 500,
      leaseTtlMs: 15_000,
      leaseIdleMs: 5_000,
      leaseBlockCalls: 32,
      keyCacheMs: 1_000,
    })
  })

  test('body limits: live calls 8 MiB by default; the file limit can be set (its bound was negative)', () => {
    expect(loadConfig({}).limits).toMatchObject({
      maxLiveBodyBytes: 8 * 1024 * 1024,
      maxFileBytes: 200_000_000,
    })
    const set = loadConfig({
      MULTIGRID_MAX_LIVE_BODY_BYTES: '65536',
      MULTIGRID_MAX_FILE_BYTES: '1000000',
    }).limits
    expect(set).toMatchObject({ maxLiveBodyBytes: 65536, maxFileBytes: 1_000_000 })
    expect(() => loadConfig({ MULTIGRID_MAX_LIVE_BODY_BYTES: '10' })).toThrow(
      'invalid MULTIGRID_MAX_LIVE_BODY_BYTES',
    )
  })

  test('the spill margin: 10% of the window by default, a share or a percentage', () => {
    expect(loadConfig({}).dispatch.spillMargin).toBe(0.1)
    expect(loadConfig({ MULTIGRID_SPILL_MARGIN: '0.05' }).dispatch.spillMargin).toBe(0.05)
    expect(loadConfig({ MULTIGRID_SPILL_MARGIN: '15%' }).dispatch.spillMargin).toBe(0.15)
    expect(loadConfig({ MULTIGRID_SPILL_MARGIN: '0' }).dispatch.spillMargin).toBe(0)
  })

  test('webhooks: https:// to public addresses only, a 15 s timeout, a 5 s first retry and disabled after 24 h of failures by default', () => {
    expect(loadConfig({}).webhooks).toEqual({
      allowPrivate: false,
      timeoutMs: 15_000,
      retryBaseMs: 5_000,
      disableAfterMs: 86_400_000,
    })
    const set = loadConfig({
      MULTIGRID_WEBHOOK_ALLOW_PRIVATE: 'true',
      MULTIGRID_WEBHOOK_TIMEOUT_MS: '2000',
      MULTIGRID_WEBHOOK_RETRY_BASE_MS: '200',
      MULTIGRID_WEBHOOK_DISABLE_AFTER_MS: '1500',
    }).webhooks
    expect(set).toEqual({
      allowPrivate: true,
      timeoutMs: 2_000,
      retryBaseMs: 200,
      disableAfterMs: 1_500,
    })
    expect(() => loadConfig({ MULTIGRID_WEBHOOK_DISABLE_AFTER_MS: '10' })).toThrow(
      'invalid MULTIGRID_WEBHOOK_DISABLE_AFTER_MS="10"',
    )
    expect(() => loadConfig({ MULTIGRID_WEBHOOK_ALLOW_PRIVATE: 'yes' })).toThrow(
      'invalid MULTIGRID_WEBHOOK_ALLOW_PRIVATE="yes"',
    )
  })

  test('progress streams: 20 open at once per key by default, a whole number from 1', () => {
    expect(loadConfig({}).events.maxStreamsPerKey).toBe(20)
    expect(loadConfig({ MULTIGRID_MAX_STREAMS_PER_KEY: '3' }).events.maxStreamsPerKey).toBe(3)
    for (const bad of ['0', 'many', '2.5'])
      expect(() => loadConfig({ MULTIGRID_MAX_STREAMS_PER_KEY: bad })).toThrow(
        `invalid MULTIGRID_MAX_STREAMS_PER_KEY="${bad}"`,
      )
  })

  test("the dispatch thread's PostgreSQL connections: one by default, a whole number from 1 to 64", () => {
    expect(loadConfig({}).dispatchConnections).toBe(1)
    expect(loadConfig({ MULTIGRID_DISPATCH_CONNECTIONS: '4' }).dispatchConnections).toBe(4)
    for (const bad of ['0', '65', 'four', '1.5'])
      expect(() => loadConfig({ MULTIGRID_DISPATCH_CONNECTIONS: bad })).toThrow(
        `invalid MULTIGRID_DISPATCH_CONNECTIONS="${bad}"`,
      )
  })

  test('provider keys are read from the variables the catalog names', () => {
    expect(loadConfig({ OPENAI_API_KEY: 'sk-x' }).providerKeys.openai).toBe('sk-x')
  })

  const cases: [Record<string, string>, string][] = [
    [{ PORT: 'eighty' }, 'invalid PORT="eighty"'],
    [{ PORT: '70000' }, 'invalid PORT="70000"'],
    // Set but empty (a compose file's "${PORT}" of an unset variable) is refused, not port 0.
    [{ PORT: '' }, 'invalid PORT="": must be a whole number from 0 to 65535 in decimal digits'],
    // Other forms Number() would read are refused too: 0x50 is not port 80 to whoever wrote it.
    [{ PORT: '0x50' }, 'invalid PORT="0x50": must be a whole number from 0 to 65535'],
    [{ MULTIGRID_MAX_LINES: '1e3' }, 'invalid MULTIGRID_MAX_LINES="1e3"'],
    [{ MULTIGRID_DRAIN_MS: '+5' }, 'invalid MULTIGRID_DRAIN_MS="+5"'],
    [{ MULTIGRID_POLL_MS: '500.0' }, 'invalid MULTIGRID_POLL_MS="500.0"'],
    [{ MULTIGRID_DEFAULT_MAX_FILES: ' ' }, 'invalid MULTIGRID_DEFAULT_MAX_FILES=" "'],
    [{ MULTIGRID_DRAIN_MS: '' }, 'invalid MULTIGRID_DRAIN_MS=""'],
    [{ DATABASE_URL: 'mysql://x' }, 'invalid DATABASE_URL'],
    [{ REDIS_URL: 'localhost:6379' }, 'invalid REDIS_URL'],
    [{ MULTIGRID_ADMIN_TOKEN: 'short' }, 'invalid MULTIGRID_ADMIN_TOKEN'],
    [
      { MULTIGRID_CONFIG: '/nonexistent/catalog.json' },
      'MULTIGRID_CONFIG: cannot read /nonexistent/catalog.json',
    ],
    // An idle lease must go back within 30 s: idle ≤ 25 s, plus a charge interval ≤ 5 s.
    [
      { MULTIGRID_LIVE_CHARGE_INTERVAL_MS: '60000' },
      'invalid MULTIGRID_LIVE_CHARGE_INTERVAL_MS="60000"',
    ],
    [{ MULTIGRID_LIVE_LEASE_IDLE_MS: '30000' }, 'invalid MULTIGRID_LIVE_LEASE_IDLE_MS="30000"'],
    // Revocation must reach every instance within 2 s.
    [{ MULTIGRID_KEY_CACHE_MS: '5000' }, 'invalid MULTIGRID_KEY_CACHE_MS="5000"'],
    // Half the window or more would leave the cheap offerings too little of it.
    [{ MULTIGRID_SPILL_MARGIN: '0.5' }, 'invalid MULTIGRID_SPILL_MARGIN="0.5"'],
    [{ MULTIGRID_SPILL_MARGIN: '10 %' }, 'invalid MULTIGRID_SPILL_MARGIN="10 %"'],
    [{ MULTIGRID_SPILL_MARGIN: '-0.1' }, 'invalid MULTIGRID_SPILL_MARGIN="-0.1"'],
  ]
  for (const [env, message] of cases) {
    test(`refuses ${Object.keys(env)[0]}=${Object.values(env)[0]}`, () => {
      expect(() => loadConfig(env)).toThrow(ConfigError)
      expect(() => loadConfig(env)).toThrow(message)
    })
  }

  test('a bad providers file names the path inside it', () => {
    const path = writeCatalog({
      providers: { x: { kind: 'openai', base_url: 'not a url' } },
      models: [],
    })
    expect(() => loadConfig({ MULTIGRID_CONFIG: path })).toThrow(`${path}: providers.x.base_url`)
    // A model whose one offering names a provider the file does not have.
    const ghostModel = (fields: Record<string, unknown> = {}) =>
      writeCatalog({
        providers: {},
        models: [
          {
            id: 'm',
            endpoints: ['chat'],
            context_tokens: 1,
            max_output_tokens: 1,
            ...fields,
            offerings: [{ provider: 'ghost', upstream_model: 'm', input_usd_per_mtok: '1' }],
          },
        ],
      })
    const unknownProvider = ghostModel()
    expect(() => loadConfig({ MULTIGRID_CONFIG: unknownProvider })).toThrow(
      'models[0].offerings[0].provider: "ghost" is not in providers',
    )
    // Told first also where the model's other fields need that provider (its adapters a pool).
    const withAdapters = ghostModel({ adapters: { max_per_batch: 4 } })
    expect(() => loadConfig({ MULTIGRID_CONFIG: withAdapters })).toThrow(
      `${withAdapters}: models[0].offerings[0].provider: "ghost" is not in providers`,
    )
  })

  test('a replica that is not http(s), or is listed twice, is refused with the place it sits', () => {
    const pool = (base_url: unknown) =>
      writeCatalog({ providers: { pool: { kind: 'openai', base_url } }, models: [] })
    const ftp = pool('ftp://127.0.0.1:9/v1')
    expect(() => loadConfig({ MULTIGRID_CONFIG: ftp })).toThrow(
      `${ftp}: providers.pool.base_url: "ftp://127.0.0.1:9/v1" is not an http:// or https:// URL`,
    )
    const twice = pool([
      'http://127.0.0.1:9/v1',
      'http://127.0.0.1:10/v1',
      'http://127.0.0.1:9/v1/',
    ])
    expect(() => loadConfig({ MULTIGRID_CONFIG: twice })).toThrow(
      `${twice}: providers.pool.base_url[2]: "http://127.0.0.1:9/v1/" is listed twice; list each replica once`,
    )
    // The schema's own refusals name the place the same way.
    const badLane = writeCatalog({
      providers: { pool: { kind: 'openai', base_url: 'http://127.0.0.1:9/v1' } },
      models: [
        {
          id: 'm',
          endpoints: ['chat'],
          context_tokens: 8,
          max_output_tokens: 4,
          offerings: [
            { provider: 'pool', upstream_model: 'm', input_usd_per_mtok: '0', lane: 'x' },
          ],
        },
      ],
    })
    expect(() => loadConfig({ MULTIGRID_CONFIG: badLane })).toThrow(
      `${badLane}: models[0].offerings[0].lane: `,
    )
    const two = pool(['http://127.0.0.1:9/v1', 'https://127.0.0.1:10/v1'])
    expect(loadConfig({ MULTIGRID_CONFIG: two }).catalog.providers.pool.base_url).toHaveLength(2)
  })

  test('a model whose max_output_tokens exceeds its context, or with adapters no pool can load, is refused', () => {
    const catalog = (model: Record<string, unknown>, lora: boolean) =>
      writeCatalog({
        providers: { pool: { kind: 'openai', base_url: 'http://127.0.0.1:9/v1', lora } },
        models: [
          {
            id: 'm',
            endpoints: ['chat'],
            context_tokens: 8192,
            max_output_tokens: 4096,
            offerings: [{ provider: 'pool', upstream_model: 'm', input_usd_per_mtok: '0' }],
            ...model,
          },
        ],
      })
    const over = catalog({ max_output_tokens: 8193 }, false)
    expect(() => loadConfig({ MULTIGRID_CONFIG: over })).toThrow(
      `${over}: models[0].max_output_tokens: 8193 is more than its context_tokens (8192)`,
    )
    expect(
      loadConfig({ MULTIGRID_CONFIG: catalog({ max_output_tokens: 8192 }, false) }).catalog
        .models[0].max_output_tokens,
    ).toBe(8192)
    const adapters = { adapters: { max_per_batch: 4 } }
    const noLora = catalog(adapters, false)
    expect(() => loadConfig({ MULTIGRID_CONFIG: noLora })).toThrow(
      `${noLora}: models[0].adapters: none of its offerings is on a provider with "lora": true`,
    )
    const withLora = loadConfig({ MULTIGRID_CONFIG: catalog(adapters, true) })
    expect(withLora.catalog.models[0].adapters?.max_per_batch).toBe(4)
  })

  test('adaptive_concurrency: off unless set, true turns it on, anything but a boolean is refused', () => {
    const pool = (extra: Record<string, unknown>) =>
      writeCatalog({
        providers: { pool: { kind: 'openai', base_url: 'http://127.0.0.1:9/v1', ...extra } },
        models: [],
      })
    expect(
      loadConfig({ MULTIGRID_CONFIG: pool({}) }).catalog.providers.pool.adaptive_concurrency,
    ).toBe(false)
    const on = loadConfig({ MULTIGRID_CONFIG: pool({ adaptive_concurrency: true }) })
    expect(on.catalog.providers.pool.adaptive_concurrency).toBe(true)
    const path = pool({ adaptive_concurrency: 'yes' })
    expect(() => loadConfig({ MULTIGRID_CONFIG: path })).toThrow(
      `${path}: providers.pool.adaptive_concurrency`,
    )
  })

  test('a catalog field missing or of the wrong type is said in words with the fix, at its place', () => {
    const path = writeCatalog({
      providers: { pool: { kind: 'openai', base_url: 'http://127.0.0.1:9/v1' } },
      models: [
        {
          id: 'm',
          endpoints: ['chat'],
          context_tokens: 1000,
          max_output_tokens: 100,
          offerings: [{ provider: 'pool', input_usd_per_mtok: '1', output_usd_per_mtok: '2' }],
        },
      ],
    })
    expect(() => loadConfig({ MULTIGRID_CONFIG: path })).toThrow(
      `${path}: models[0].offerings[0].upstream_model: is required; add models[0].offerings[0].upstream_model (a string)`,
    )
  })

  test('start-up with a bad value prints one line and exits non-zero', async () => {
    const child = Bun.spawn([process.execPath, 'src/main.ts'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', PORT: 'x' },
      stderr: 'pipe',
      stdout: 'pipe',
    })
    expect(await child.exited).toBe(78)
    expect((await new Response(child.stderr).text()).trim()).toBe(
      'multigrid: configuration error: invalid PORT="x": must be a whole number from 0 to 65535 in decimal digits',
    )
  })

  test('a data directory that cannot be made or written is one line naming the variable, for the gateway and mg', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'mg-dir-')), 'a-file')
    writeFileSync(file, 'not a directory')
    for (const [script, exit] of [
      ['src/main.ts', 78],
      ['src/cli/admin.ts', 2],
    ] as const) {
      const child = Bun.spawn([process.execPath, script, 'accounts', 'create', 'x'], {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', PORT: '0', MULTIGRID_DATA_DIR: file },
        stderr: 'pipe',
        stdout: 'pipe',
      })
      expect(await child.exited).toBe(exit)
      const said = (await new Response(child.stderr).text()).trim()
      expect(said.split('\n')).toHaveLength(1)
      expect(said).toContain(`MULTIGRID_DATA_DIR: cannot use ${file} for the store (EEXIST`)
      expect(said).toContain('set MULTIGRID_DATA_DIR to a directory')
    }
  })

  test('a PostgreSQL that cannot be reached or refuses, and an address that cannot be listened on, are one line naming the variable, never the password', async () => {
    const closed = freePort()
    const cases: [Record<string, string>, string][] = [
      [
        { DATABASE_URL: `postgres://mg:SECRETPW@127.0.0.1:${closed}/multigrid` },
        `multigrid: configuration error: DATABASE_URL: cannot reach PostgreSQL at 127.0.0.1:${closed} (ECONNREFUSED); start it, or set DATABASE_URL`,
      ],
      [
        { HOST: '999.1.1.1' },
        'multigrid: configuration error: HOST: cannot listen on 999.1.1.1 port 0 (EINVAL); set HOST to an address of this machine',
      ],
    ]
    if (TEST_DATABASE_URL) {
      const url = new URL(TEST_DATABASE_URL)
      url.pathname = '/mg_no_such_database'
      cases.push([
        { DATABASE_URL: url.href },
        'refused the connection: database "mg_no_such_database" does not exist (3D000); create it (createdb mg_no_such_database)',
      ])
    }
    for (const [env, line] of cases) {
      const child = Bun.spawn([process.execPath, 'src/main.ts'], {
        cwd: root,
        env: { PATH: process.env.PATH ?? '', PORT: '0', ...env },
        stderr: 'pipe',
        stdout: 'pipe',
      })
      expect(await child.exited).toBe(78)
      const said = (await new Response(child.stderr).text()).trim()
      expect(said.split('\n')).toHaveLength(1)
      expect(said).toContain(line)
      expect(said).not.toContain('SECRETPW')
    }
    // mg says the same of the store it cannot open.
    const mg = Bun.spawn([process.execPath, 'src/cli/admin.ts', 'accounts', 'list'], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: `postgres://mg@127.0.0.1:${closed}/x` },
      stderr: 'pipe',
      stdout: 'pipe',
    })
    expect(await mg.exited).toBe(2)
    expect((await new Response(mg.stderr).text()).trim()).toStartWith(
      `configuration error: DATABASE_URL: cannot reach PostgreSQL at 127.0.0.1:${closed} (ECONNREFUSED)`,
    )
  })

  test('a second gateway on a port in use says so in one line and exits; the first keeps serving', async () => {
    const port = String(freePort())
    const env = (dir: string) => ({
      PATH: process.env.PATH ?? '',
      PORT: port,
      HOST: '127.0.0.1',
      MULTIGRID_DATA_DIR: dir,
      LOG_LEVEL: 'error',
    })
    const first = await spawnGatewayProcess(env(mkdtempSync(join(tmpdir(), 'mg-port-'))))
    try {
      const second = Bun.spawn([process.execPath, 'src/main.ts'], {
        cwd: root,
        env: env(mkdtempSync(join(tmpdir(), 'mg-port-'))),
        stderr: 'pipe',
        stdout: 'pipe',
      })
      expect(await second.exited).toBe(69)
      expect((await new Response(second.stderr).text()).trim()).toBe(
        `multigrid: port ${port} on 127.0.0.1 is in use: stop what is listening there, or set PORT`,
      )
      expect((await fetch(`${first.url}/healthz`)).status).toBe(200)
    } finally {
      expect(await first.kill('SIGTERM')).toBe(0)
    }
  })
})
