/**
 * The webhook receiver of docs/events-and-webhooks.md runs as written: it verifies a real delivery with the official
 * `openai` SDK and prints the event, and it refuses a delivery signed with another secret.
 */
import { afterAll, beforeAll, expect, test } from 'bun:test'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { newWebhookSecret, signedHeaders } from '../../src/webhooks/sign-webhook.ts'
import { ROOT, readDoc, sectionBlocks } from '../helpers/doc-blocks.ts'
import { chatLine, jsonl, startTestGateway, type TestGateway } from '../helpers/gateway.ts'
import { freePort } from '../helpers/process-gateway.ts'
import { waitFor } from '../helpers/wait.ts'

let sim: Simulator
let gw: TestGateway
beforeAll(async () => {
  sim = await startSimulator({ latencyMs: 1 })
  gw = await startTestGateway({
    upstreams: { openai: `${sim.url}/v1` },
    env: { MULTIGRID_POLL_MS: '50', MULTIGRID_WEBHOOK_ALLOW_PRIVATE: 'true' },
  })
})
afterAll(async () => {
  await gw.stop()
  await sim.stop()
})

test('the receiver in the webhooks walk-through verifies and prints a real delivery', async () => {
  const [code] = sectionBlocks(readDoc('docs/events-and-webhooks.md'), '## Webhooks', 'ts')
  expect(code).toBeString()
  expect(code).toContain('port: 9000')
  // Only the port changes: the test needs a free one.
  const port = freePort()
  const dir = mkdtempSync(join(tmpdir(), 'mg-docs-hooks-'))
  writeFileSync(join(dir, 'receiver.ts'), code!.replace('port: 9000', `port: ${port}`))

  const { key } = await gw.newAccount('1')
  const created = await gw.request('/v1/webhooks', key, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ url: `http://127.0.0.1:${port}/hooks/multigrid` }),
  })
  expect(created.status).toBe(201)
  const webhook = (await created.json()) as { id: string; secret: string }
  const child = Bun.spawn([process.execPath, join(dir, 'receiver.ts')], {
    cwd: dir,
    env: {
      PATH: process.env.PATH ?? '',
      MULTIGRID_WEBHOOK_SECRET: webhook.secret,
      NODE_PATH: join(ROOT, 'node_modules'),
    },
    stdout: 'pipe',
    stderr: 'pipe',
  })
  let out = ''
  let id = ''
  const reading = (async () => {
    const reader = child.stdout.getReader()
    const decoder = new TextDecoder()
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      out += decoder.decode(value, { stream: true })
    }
  })()
  try {
    await waitFor('the receiver to listen', async () => {
      try {
        await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', body: '{}' })
        return true
      } catch {
        return false
      }
    })
    // A delivery signed with another secret is refused.
    const body = JSON.stringify({ id: 'evt_x', object: 'event', type: 'batch.completed', data: {} })
    const forged = await fetch(`http://127.0.0.1:${port}/hooks/multigrid`, {
      method: 'POST',
      headers: signedHeaders(newWebhookSecret(), {
        id: 'evt_x',
        timestamp: Math.floor(Date.now() / 1000),
        body,
      }),
      body,
    })
    expect(forged.status).toBe(400)

    const submitted = await gw.request('/v1/batches', key, {
      method: 'POST',
      body: jsonl([chatLine('ticket-1')]),
    })
    id = ((await submitted.json()) as { id: string }).id
    await waitFor('the receiver to print the event', async () =>
      out.includes(`batch.completed ${id}`),
    )
    // The receiver prints before it answers, and the gateway records the answer after it comes:
    // the delivery is read once it is no longer pending.
    const delivery = await waitFor('the delivery to be recorded', async () => {
      const [latest] = (
        (await (await gw.request(`/v1/webhooks/${webhook.id}/deliveries`, key)).json()) as {
          data: { status: string; last_status_code: number }[]
        }
      ).data
      return latest && latest.status !== 'pending' ? latest : null
    })
    expect(delivery).toMatchObject({ status: 'delivered', last_status_code: 204 })
  } finally {
    child.kill()
    await child.exited
    await reading
  }
  // The forged delivery and the probes printed nothing; the real one, once.
  expect(out.trim().split('\n')).toEqual([`batch.completed ${id}`])
})
