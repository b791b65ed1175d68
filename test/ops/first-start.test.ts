/**
 * A gateway started on a fresh install (no account yet) tells the person who started it how to
 * make the first account and key; once one exists, it says nothing of the kind.
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
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
    stdout: 'ignore',
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
  await child.exited
  return new Response(child.stderr).text()
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
    expect(first).toContain('there is no account yet')
    expect(first).toContain('npm run mg -- accounts create')
    expect(first).toContain('npm run mg -- keys create')

    const second = await startAndStop({ ...env, PORT: String(freePort()) })
    expect(second).not.toContain('no account yet')
  })
})
