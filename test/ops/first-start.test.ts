/**
 * A gateway started on a fresh install (no account yet) tells the person who started it how to
 * make the first account and key; once one exists, it says nothing of the kind.
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { adminCommand } from '../../src/cli/start-up-notes.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import { ADMIN_TOKEN } from '../helpers/gateway.ts'
import { freePort } from '../helpers/process-gateway.ts'

const ROOT = join(import.meta.dir, '../..')

/** Starts src/main.ts, waits until it answers, stops it, and returns what it wrote to stderr. */
async function startAndStop(
  env: Record<string, string>,
  whileUp: (url: string) => Promise<void> = async () => {},
) {
  const child = Bun.spawn([process.execPath, join(ROOT, 'src/main.ts')], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  const url = `http://127.0.0.1:${env.PORT}`
  const deadline = Date.now() + 15_000
  for (;;) {
    const up = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    )
    if (up) break
    if (Date.now() > deadline) throw new Error('gateway process did not start')
    await Bun.sleep(50)
  }
  // The advice is printed right after the server starts listening; give it a moment.
  await Bun.sleep(200)
  await whileUp(url)
  child.kill('SIGTERM')
  const [, stdout, stderr] = await Promise.all([
    child.exited,
    new Response(child.stdout).text(),
    new Response(child.stderr).text(),
  ])
  return { stderr, stdout }
}

describe('first start', () => {
  test('with no account yet, start-up prints how to make one and a key; with one, it does not', async () => {
    const env = {
      HOST: '127.0.0.1',
      MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-first-')),
      MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
      MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
      LOG_LEVEL: 'error',
    }
    const first = await startAndStop({ ...env, PORT: String(freePort()) }, async (url) => {
      const made = await fetch(`${url}/admin/v1/accounts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'acme', credit_usd: '1' }),
      })
      expect(made.status).toBe(201)
    })
    expect(first.stderr).toContain('there is no account yet')
    // Started by Bun from the npm package (as here), not by npm: the CLI as that Bun runs it.
    expect(first.stderr).toContain('npx bun src/cli/admin.ts accounts create')
    expect(first.stderr).toContain('npx bun src/cli/admin.ts keys create')

    const second = await startAndStop({ ...env, PORT: String(freePort()) })
    expect(second.stderr).not.toContain('no account yet')
  })

  test('the hint runs the admin CLI as the gateway was started: npm start, the npm package’s Bun, or a bun on the PATH (the Docker image)', async () => {
    expect(adminCommand({ byNpm: true, bunPath: process.execPath })).toBe('npm run mg --')
    expect(adminCommand({ byNpm: false, bunPath: '/usr/local/bin/bun' })).toBe(
      'bun src/cli/admin.ts',
    )
    expect(adminCommand({ byNpm: false, bunPath: '/app/node_modules/bun/bin/bun.exe' })).toBe(
      'npx bun src/cli/admin.ts',
    )
    // npm start sets npm_lifecycle_event for the gateway it starts.
    const env = {
      HOST: '127.0.0.1',
      MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-npm-')),
      MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
      LOG_LEVEL: 'error',
      npm_lifecycle_event: 'start',
    }
    const started = await startAndStop({ ...env, PORT: String(freePort()) })
    expect(started.stderr).toContain('npm run mg -- accounts create acme --credit 10')
  })

  test('the first-key hint names the data dir, and its commands make the account in the store this gateway serves', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mg-hint-'))
    const env = {
      HOST: '127.0.0.1',
      MULTIGRID_DATA_DIR: dataDir,
      MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
      LOG_LEVEL: 'error',
    }
    const first = await startAndStop({ ...env, PORT: String(freePort()) })
    const create = first.stderr.split('\n').find((line) => line.includes('accounts create'))!
    expect(create.trim()).toBe(
      `MULTIGRID_DATA_DIR=${dataDir} npx bun src/cli/admin.ts accounts create acme --credit 10`,
    )
    // Pasted in another shell, from the checkout, without the gateway's environment.
    const pasted = Bun.spawn(['sh', '-c', create.trim()], {
      cwd: ROOT,
      env: { PATH: `${dirname(process.execPath)}:${process.env.PATH ?? ''}` },
      stdout: 'pipe',
      stderr: 'pipe',
    })
    expect(await pasted.exited).toBe(0)
    // Whatever runs it may print a banner of its own before the JSON.
    const out = await new Response(pasted.stdout).text()
    const account = JSON.parse(out.slice(out.indexOf('{'))) as { id: string }
    expect(account.id).toMatch(/^acct_/)
    const second = await startAndStop({ ...env, PORT: String(freePort()) })
    expect(second.stderr).not.toContain('no account yet')
  })

  test('providers without a key are logged with the models left without an offering, and the way to try offline is printed', async () => {
    const env = {
      HOST: '127.0.0.1',
      PORT: String(freePort()),
      MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-keys-')),
      MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
      LOG_LEVEL: 'info',
    }
    const { stderr, stdout } = await startAndStop(env)
    const logged = stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((entry) => entry.event === 'providers.missing_keys')!
    expect(logged.level).toBe('warn')
    expect(logged.providers).toEqual(['sim-anthropic', 'paid'])
    expect(logged.env).toEqual(['MG_TEST_ANTHROPIC_KEY', 'MG_TEST_PAID_KEY'])
    // sim/claude runs only on sim-anthropic; sim/multi has an offering on sim as well.
    expect(logged.models_without_offering).toContain('sim/claude')
    expect(logged.models_without_offering).not.toContain('sim/multi')
    expect(logged.models_without_offering).not.toContain('sim/chat')
    expect(String(logged.offline)).toContain('npm run demo')
    expect(stderr).toContain(
      'no API key for sim-anthropic (set MG_TEST_ANTHROPIC_KEY), paid (set MG_TEST_PAID_KEY)',
    )
    expect(stderr).toContain('npm run demo')
    // A key set under a misspelt name is named, with the name to give it; another provider's
    // key variable is never taken for one.
    const typo = await startAndStop({
      ...env,
      PORT: String(freePort()),
      MG_TEST_ANTHROPIC_KY: 'k',
    })
    expect(typo.stderr).toContain(
      'sim-anthropic (set MG_TEST_ANTHROPIC_KEY; MG_TEST_ANTHROPIC_KY is set, which the gateway does not read: rename it to MG_TEST_ANTHROPIC_KEY)',
    )
    expect(typo.stderr).toContain('paid (set MG_TEST_PAID_KEY).')
    // With every key set, nothing of the kind.
    const keyed = await startAndStop({
      ...env,
      PORT: String(freePort()),
      MG_TEST_ANTHROPIC_KEY: 'k',
      MG_TEST_PAID_KEY: 'k',
    })
    expect(keyed.stderr).not.toContain('no API key')
    expect(keyed.stdout).not.toContain('providers.missing_keys')
  })
})
