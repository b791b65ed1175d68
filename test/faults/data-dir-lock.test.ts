/**
 * The embedded store is one gateway process's: a second gateway started on a data dir in use is
 * refused at start, and the first one's upload in progress goes on untouched. Before, the second
 * one started, and its start-up sweep (meant for what a crashed run left) deleted the first one's
 * upload mid-body: answered 408 "stalled for minutes" after a second. The lock goes with the
 * process, SIGKILL included, so a restart after a crash starts at once.
 */
import { describe, expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { GATEWAY_BUN_ARGS } from '../../src/http/head-limit.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import { ADMIN_TOKEN, chatLine, jsonl, startTestGateway } from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess } from '../helpers/process-gateway.ts'

const BOUNDARY = 'data-dir-lock-boundary'

/** What a second gateway on the same data dir did within 10 s: exited (code, stderr) or served. */
async function secondGateway(env: Record<string, string>) {
  const child = Bun.spawn(
    [process.execPath, ...GATEWAY_BUN_ARGS, join(import.meta.dir, '../../src/main.ts')],
    { env: { PATH: process.env.PATH ?? '', ...env }, stdout: 'ignore', stderr: 'pipe' },
  )
  const url = `http://127.0.0.1:${env.PORT}`
  const deadline = Date.now() + 10_000
  let served = false
  while (!served && child.exitCode === null && Date.now() < deadline) {
    served = await fetch(`${url}/healthz`).then(
      (answer) => answer.ok,
      () => false,
    )
    await Bun.sleep(50)
  }
  if (served) {
    // Long enough for its start-up sweep to run.
    await Bun.sleep(1_000)
    child.kill('SIGKILL')
  }
  const code = await child.exited
  return { served, code, stderr: await new Response(child.stderr).text() }
}

describe('one gateway a data dir (sqlite)', () => {
  test('a second gateway on a data dir in use is refused, and the first one’s upload goes on', async () => {
    const env: Record<string, string> = {
      PORT: String(freePort()),
      HOST: '127.0.0.1',
      MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-lock-')),
      MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
      MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
      MULTIGRID_DISPATCH: '0',
      LOG_LEVEL: 'warn',
    }
    let first = await spawnGatewayProcess(env)
    try {
      const admin = (path: string, body: unknown) =>
        fetch(`${first.url}/admin/v1${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        }).then((answer) => answer.json() as Promise<{ id: string; key: string }>)
      const { id: accountId } = await admin('/accounts', { name: 'lock', credit_usd: '1' })
      const { key } = await admin(`/accounts/${accountId}/keys`, {})

      // An upload to the first gateway, half sent.
      const content = jsonl(Array.from({ length: 2_000 }, (_, i) => chatLine(`u-${i}`, `up ${i}`)))
      const body = Buffer.from(
        `--${BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n` +
          `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="in.jsonl"\r\n` +
          `Content-Type: application/jsonl\r\n\r\n${content}\r\n--${BOUNDARY}--\r\n`,
      )
      const socket = connect(Number(env.PORT), '127.0.0.1')
      socket.on('error', () => {})
      let answer = ''
      socket.on('data', (data) => (answer += data.toString()))
      socket.write(
        `POST /openai/v1/files HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n` +
          `Content-Type: multipart/form-data; boundary=${BOUNDARY}\r\nContent-Length: ${body.length}\r\n\r\n`,
      )
      socket.write(body.subarray(0, body.length >> 1))
      await Bun.sleep(300)

      const second = await secondGateway({ ...env, PORT: String(freePort()) })
      expect(second.served).toBe(false)
      expect(second.code).toBe(69)
      expect(second.stderr).toContain('is in use by another gateway')

      socket.write(body.subarray(body.length >> 1))
      const deadline = Date.now() + 10_000
      while (!answer.includes('\r\n\r\n{') && Date.now() < deadline) await Bun.sleep(20)
      socket.destroy()
      expect(answer.split('\r\n')[0]).toBe('HTTP/1.1 200 OK')
      const { id } = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { id: string }
      const stored = await fetch(`${first.url}/openai/v1/files/${id}/content`, {
        headers: { authorization: `Bearer ${key}` },
      })
      expect(await stored.text()).toBe(content)

      // The lock goes with the process: after a SIGKILL a gateway starts on the data dir at once,
      // and after a stop one in this process does too.
      await first.kill('SIGKILL')
      first = await spawnGatewayProcess(env)
      expect(await first.kill('SIGTERM')).toBe(0)
      const inProcess = await startTestGateway({ env: { ...env, PORT: '0' } })
      await inProcess.stop()
      first = await spawnGatewayProcess(env)
    } finally {
      await first.kill('SIGKILL')
    }
  }, 60_000)
})
