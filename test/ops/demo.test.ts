/**
 * `npm run demo`: the simulator and a gateway on it, an account with credit and a key printed;
 * the key works on the gateway at once, and SIGINT (Ctrl-C) stops both servers.
 */
import { expect, test } from 'bun:test'
import { mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { GATEWAY_BUN_ARGS } from '../../src/http/head-limit.ts'
import { freePort } from '../helpers/process-gateway.ts'

const ROOT = join(import.meta.dir, '../..')

/** Reads the child's stdout until `done` holds for what arrived, or 30 s pass. */
async function readUntil(stream: ReadableStream<Uint8Array>, done: (text: string) => boolean) {
  const reader = stream.getReader()
  const decoder = new TextDecoder()
  let text = ''
  const deadline = Date.now() + 30_000
  // One read pending at a time: a read left behind by the timer keeps its chunk for the next turn.
  let pending = reader.read()
  while (!done(text) && Date.now() < deadline) {
    const next = await Promise.race([pending, Bun.sleep(1_000).then(() => null)])
    if (next === null) continue
    if (next.done) break
    text += decoder.decode(next.value, { stream: true })
    pending = reader.read()
  }
  return text
}

const refused = (port: number) =>
  fetch(`http://127.0.0.1:${port}/healthz`).then(
    () => false,
    () => true,
  )

test('npm run demo (on PORT, SIM_PORT and MULTIGRID_DATA_DIR) prints a working key and a curl line; SIGINT stops the gateway and the simulator', async () => {
  const script = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).scripts.demo
  expect(script).toContain(`bun ${GATEWAY_BUN_ARGS.join(' ')} src/cli/demo.ts`)
  const port = freePort()
  const simPort = freePort()
  const dataDir = mkdtempSync(join(tmpdir(), 'mg-demo-'))
  const child = Bun.spawn([process.execPath, ...GATEWAY_BUN_ARGS, join(ROOT, 'src/cli/demo.ts')], {
    cwd: ROOT,
    // The ports and the data directory as npm start and the walk-through take them (--port,
    // --sim-port and --data-dir also do).
    env: {
      PATH: process.env.PATH ?? '',
      PORT: String(port),
      SIM_PORT: String(simPort),
      MULTIGRID_DATA_DIR: dataDir,
    },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  try {
    const out = await readUntil(child.stdout, (text) => text.includes('Ctrl-C stops both'))
    const key = /^key\s+(mg_\S+)$/m.exec(out)?.[1]
    expect(key).toBeDefined()
    expect(out).toContain(`export MULTIGRID_API_KEY=${key}`)
    expect(out).toContain(`export MULTIGRID_URL=http://127.0.0.1:${port}`)
    expect(out).toMatch(/\(\$10 of credit\)/)
    // mg in the other shell works on this demo's store: its exports name the data dir.
    const exports = out
      .split('\n')
      .filter((line) => line.trim().startsWith('export '))
      .map((line) => line.trim())
    expect(exports).toContain(`export MULTIGRID_DATA_DIR=${dataDir}`)
    const account = /^account\s+(acct_\S+)/m.exec(out)![1]!
    const shown = Bun.spawn(
      [
        'sh',
        '-c',
        `${exports.join('; ')}; ${process.execPath} src/cli/admin.ts accounts show ${account}`,
      ],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '' }, stdout: 'pipe', stderr: 'pipe' },
    )
    expect(await shown.exited).toBe(0)
    expect(await new Response(shown.stdout).text()).toContain(account)

    // The printed curl line, as pasted into a shell.
    const curl = out.split('\n').find((line) => line.trim().startsWith('curl '))!
    const pasted = Bun.spawn(['sh', '-c', curl.trim()], { stdout: 'pipe', stderr: 'pipe' })
    expect(await pasted.exited).toBe(0)
    const answer = JSON.parse(await new Response(pasted.stdout).text())
    expect(answer.object).toBe('chat.completion')
    expect(answer.usage.completion_tokens).toBeGreaterThan(0)

    // Every model of the simulator catalog is offered, none left without a key.
    const models = await fetch(`http://127.0.0.1:${port}/v1/models`, {
      headers: { authorization: `Bearer ${key}` },
    })
    expect(models.status).toBe(200)
    const ids = ((await models.json()) as { data: { id: string }[] }).data.map((m) => m.id)
    expect(ids).toContain('anthropic/claude-haiku-4-5')
    expect(await refused(simPort)).toBe(false)

    child.kill('SIGINT')
    expect(await child.exited).toBe(0)
    expect(await refused(port)).toBe(true)
    expect(await refused(simPort)).toBe(true)
  } finally {
    child.kill('SIGKILL')
  }
})
