/** Cancel, expiry, and the process being killed: every line ends in exactly one final state, billed once. */
import { Database } from 'bun:sqlite'
import { describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startSimulator } from '../../src/simulator/server.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import { ADMIN_TOKEN, chatLine, jsonl, startTestGateway } from '../helpers/gateway.ts'
import { freePort, spawnGatewayProcess } from '../helpers/process-gateway.ts'
import { openStoreFile } from '../helpers/store-file.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

type Batch = {
  id: string
  status: string
  request_counts: Record<string, number>
  cost_usd: string
}
type Result = {
  custom_id: string
  status: string
  cost_usd?: string
  error: { code: string } | null
  attempts?: number
}

const parseResults = (text: string) =>
  text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Result)

describe('finishing', () => {
  test('a batch completes as soon as its last line is recorded, not on the next maintenance rounds', async () => {
    const sim = await startSimulator({ latencyMs: 0 })
    // Maintenance every second: on the interval alone, in_progress → finalizing → completed takes over a second.
    const gw = await startTestGateway({
      catalog: testCatalog({ openai: `${sim.url}/v1` }),
      env: { MULTIGRID_POLL_MS: '1000' },
    })
    try {
      const { key } = await gw.newAccount('1')
      const lines = Array.from({ length: 5 }, (_, i) => chatLine(`f-${i}`, `finish me ${i}`))
      const started = performance.now()
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      const batch = await waitFor(
        'completed',
        async () => {
          const b = (await (await gw.request(`/v1/batches/${created.id}`, key)).json()) as Batch
          return FINAL_BATCH.includes(b.status) ? b : null
        },
        10_000,
        10,
      )
      expect(batch.status).toBe('completed')
      expect(batch.request_counts.succeeded).toBe(5)
      expect(performance.now() - started).toBeLessThan(800)
    } finally {
      await gw.stop()
      await sim.stop()
    }
  })
})

describe('cancel and expiry', () => {
  test('cancel: lines upstream finish and are billed, the rest end cancelled and are never sent', async () => {
    const sim = await startSimulator({ latencyMs: 400 })
    const gw = await startTestGateway({
      catalog: testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 4 }),
      env: { MULTIGRID_POLL_MS: '50' },
    })
    try {
      const { key, accountId } = await gw.newAccount('1')
      const lines = Array.from({ length: 40 }, (_, i) => chatLine(`c-${i}`, `cancel me ${i}`))
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      await waitFor('lines upstream', async () => sim.stats().inFlight >= 4)
      const cancel = await gw.request(`/v1/batches/${created.id}`, key, { method: 'DELETE' })
      expect(cancel.status).toBe(200)
      expect(((await cancel.json()) as Batch).status).toBe('cancelling')
      const batch = await waitFor('cancelled', async () => {
        const b = (await (await gw.request(`/v1/batches/${created.id}`, key)).json()) as Batch
        return b.status === 'cancelled' ? b : null
      })
      const sent = sim.stats().byPath['/v1/chat/completions'] ?? 0
      expect(batch.request_counts.succeeded).toBe(sent)
      expect(batch.request_counts.succeeded).toBeGreaterThanOrEqual(4)
      expect(batch.request_counts.cancelled).toBe(40 - sent)
      expect(batch.request_counts.pending + batch.request_counts.running).toBe(0)
      const rows = parseResults(
        await (await gw.request(`/v1/batches/${created.id}/results`, key)).text(),
      )
      let billed = new Decimal(0)
      for (const row of rows) {
        expect(['succeeded', 'cancelled']).toContain(row.status)
        if (row.status === 'cancelled') expect(row.error!.code).toBe('batch_cancelled')
        billed = billed.plus(row.cost_usd ?? 0)
      }
      const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as Record<
        string,
        string
      >
      expect(account.held_usd).toBe('0.000000')
      expect(new Decimal(1).minus(account.balance_usd).equals(billed)).toBe(true)
    } finally {
      await gw.stop()
      await sim.stop()
    }
  })

  test('cancel: lines waiting at the gate behind another batch leave it at once, never sent', async () => {
    const sim = await startSimulator({ latencyMs: 2000, keepBodies: 50 })
    const gw = await startTestGateway({
      catalog: testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 1 }),
      env: { MULTIGRID_POLL_MS: '50' },
    })
    try {
      const { key } = await gw.newAccount('1')
      const submit = async (prefix: string, hours: number) =>
        (await (
          await gw.request(`/v1/batches?completion_window_hours=${hours}`, key, {
            method: 'POST',
            body: jsonl(Array.from({ length: 4 }, (_, i) => chatLine(`${prefix}-${i}`, prefix))),
          })
        ).json()) as Batch
      const read = async (id: string) =>
        (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
      // Due first, it holds the one slot; the later batch's lines are claimed and wait behind it.
      const first = await submit('first', 1)
      const later = await submit('later', 24)
      await waitFor('a line of the later batch waiting at the gate', async () => {
        const batch = await read(later.id)
        return batch.request_counts.running > 0 && sim.stats().inFlight === 1
      })
      const cancelledAt = performance.now()
      await gw.request(`/v1/batches/${later.id}`, key, { method: 'DELETE' })
      const cancelled = await waitFor('cancelled', async () => {
        const batch = await read(later.id)
        return batch.status === 'cancelled' ? batch : null
      })
      // Well within the one upstream call (2 s) the first batch has running meanwhile.
      expect(performance.now() - cancelledAt).toBeLessThan(1500)
      expect(cancelled.request_counts).toMatchObject({ cancelled: 4, succeeded: 0, running: 0 })
      const sent = sim
        .received()
        .map((request) => JSON.parse(request.text).messages[0].content as string)
      expect(sent.length).toBeGreaterThan(0)
      expect(sent.filter((content) => content !== 'first')).toEqual([])
      expect((await read(first.id)).status).toBe('in_progress')
      await gw.request(`/v1/batches/${first.id}`, key, { method: 'DELETE' })
    } finally {
      await gw.stop()
      await sim.stop()
    }
  })

  test('expiry: at deadline_at the lines not run end expired, and the batch expired', async () => {
    const sim = await startSimulator({ latencyMs: 300 })
    const gw = await startTestGateway({
      catalog: testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 2 }),
      env: { MULTIGRID_POLL_MS: '50' },
    })
    try {
      const { key } = await gw.newAccount('1')
      const lines = Array.from({ length: 30 }, (_, i) => chatLine(`x-${i}`, `expire me ${i}`))
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      await waitFor(
        'first results',
        async () =>
          ((await (await gw.request(`/v1/batches/${created.id}`, key)).json()) as Batch)
            .request_counts.succeeded >= 2,
      )
      // Bring the deadline to now: the shortest real window is an hour.
      const db = openStoreFile(gw.env.MULTIGRID_DATA_DIR)
      db.query('UPDATE batches SET deadline_at = ? WHERE id = ?').run(
        Math.floor(Date.now() / 1000),
        created.id,
      )
      db.close()
      const batch = await waitFor('expired', async () => {
        const b = (await (await gw.request(`/v1/batches/${created.id}`, key)).json()) as Batch
        return FINAL_BATCH.includes(b.status) ? b : null
      })
      expect(batch.status).toBe('expired')
      expect(batch.request_counts.expired).toBeGreaterThan(0)
      expect(batch.request_counts.succeeded + batch.request_counts.expired).toBe(30)
      const expired = parseResults(
        await (await gw.request(`/v1/batches/${created.id}/results?filter=failed`, key)).text(),
      )
      expect(expired).toHaveLength(batch.request_counts.expired)
      expect(
        expired.every((r) => r.status === 'expired' && r.error!.code === 'batch_expired'),
      ).toBe(true)
    } finally {
      await gw.stop()
      await sim.stop()
    }
  })
  test('a line waiting for a slot when the deadline comes is not sent; the one in flight finishes', async () => {
    // One slot, a 3 s upstream: line 1 is sent at once, line 2 (claimed ahead) waits at the gate
    // and its turn comes after the deadline, 1–2 s away.
    const sim = await startSimulator({ latencyMs: 3000 })
    const catalog = testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 1 })
    const admitting = await startTestGateway({ catalog, env: { MULTIGRID_DISPATCH: '0' } })
    const dataDir = admitting.env.MULTIGRID_DATA_DIR
    let running: Awaited<ReturnType<typeof startTestGateway>> | null = null
    try {
      const { key } = await admitting.newAccount('1')
      const lines = [
        chatLine('first', 'sent before the deadline'),
        chatLine('second', 'waits past it'),
      ]
      const created = (await (
        await admitting.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      await admitting.stop()
      const db = new Database(join(dataDir, 'multigrid.sqlite'))
      db.query('UPDATE batches SET deadline_at = ? WHERE id = ?').run(
        Math.floor(Date.now() / 1000) + 2,
        created.id,
      )
      db.close()
      running = await startTestGateway({
        catalog,
        env: { MULTIGRID_DATA_DIR: dataDir, MULTIGRID_POLL_MS: '50' },
      })
      const gw = running
      const batch = await waitFor(
        'expired',
        async () => {
          const b = (await (await gw.request(`/v1/batches/${created.id}`, key)).json()) as Batch
          return FINAL_BATCH.includes(b.status) ? b : null
        },
        20_000,
      )
      expect(batch.status).toBe('expired')
      expect(batch.request_counts).toMatchObject({ succeeded: 1, expired: 1 })
      const rows = parseResults(
        await (await gw.request(`/v1/batches/${created.id}/results`, key)).text(),
      )
      expect(rows.map((r) => [r.custom_id, r.status])).toEqual([
        ['first', 'succeeded'],
        ['second', 'expired'],
      ])
      expect(sim.stats().byPath['/v1/chat/completions']).toBe(1)
    } finally {
      await running?.stop()
      await sim.stop()
    }
  })
})

describe('crash safety', () => {
  async function setup(latencyMs: number) {
    const sim = await startSimulator({ latencyMs })
    const env = {
      PORT: String(freePort()),
      HOST: '127.0.0.1',
      MULTIGRID_DATA_DIR: mkdtempSync(join(tmpdir(), 'mg-crash-')),
      MULTIGRID_CONFIG: writeCatalog(
        testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 16 }),
      ),
      MULTIGRID_ADMIN_TOKEN: ADMIN_TOKEN,
      MULTIGRID_LEASE_SECONDS: '2',
      MULTIGRID_POLL_MS: '50',
      LOG_LEVEL: 'error',
    }
    return { sim, env }
  }
  const admin = (url: string, path: string, body?: unknown) =>
    fetch(`${url}/admin/v1${path}`, {
      method: body ? 'POST' : 'GET',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
    })

  /** An account with $10 and a key for it, made through the admin API. */
  async function newAccount(url: string, name: string) {
    const account = (await (await admin(url, '/accounts', { name, credit_usd: '10' })).json()) as {
      id: string
    }
    const { key } = (await (await admin(url, `/accounts/${account.id}/keys`, {})).json()) as {
      key: string
    }
    return { account, key }
  }

  test('SIGKILL mid-batch, restart: every line ends once, recorded once, billed once', async () => {
    const { sim, env } = await setup(60)
    let gateway = await spawnGatewayProcess(env)
    const { account, key } = await newAccount(gateway.url, 'crash')
    const lines = Array.from({ length: 400 }, (_, i) => chatLine(`k-${i}`, `crash line ${i}`))
    const headers = { authorization: `Bearer ${key}` }
    const created = (await (
      await fetch(`${gateway.url}/v1/batches`, { method: 'POST', headers, body: jsonl(lines) })
    ).json()) as Batch
    await waitFor('progress', async () => {
      const b = (await (
        await fetch(`${gateway.url}/v1/batches/${created.id}`, { headers })
      ).json()) as Batch
      return b.request_counts.succeeded >= 60
    })
    expect(await gateway.kill('SIGKILL')).not.toBe(0)
    gateway = await spawnGatewayProcess(env)
    try {
      const batch = await waitFor(
        'completion after restart',
        async () => {
          const b = (await (
            await fetch(`${gateway.url}/v1/batches/${created.id}`, { headers })
          ).json()) as Batch
          return FINAL_BATCH.includes(b.status) ? b : null
        },
        60_000,
      )
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toMatchObject({
        total: 400,
        succeeded: 400,
        pending: 0,
        running: 0,
      })
      const rows = parseResults(
        await (await fetch(`${gateway.url}/v1/batches/${created.id}/results`, { headers })).text(),
      )
      expect(rows.map((r) => r.custom_id)).toEqual(lines.map((l) => l.custom_id))
      let sum = new Decimal(0)
      for (const row of rows) sum = sum.plus(row.cost_usd!)
      const view = (await (await admin(gateway.url, `/accounts/${account.id}`)).json()) as Record<
        string,
        string
      >
      expect(view.held_usd).toBe('0.000000')
      expect(new Decimal(10).minus(view.balance_usd).equals(sum)).toBe(true)
      expect(new Decimal(batch.cost_usd).equals(sum)).toBe(true)
      // Only lines in flight at the kill can have gone upstream twice.
      expect(sim.stats().maxPromptCount).toBeLessThanOrEqual(2)
    } finally {
      await gateway.kill('SIGTERM')
      await sim.stop()
    }
  })

  test('SIGTERM past the drain: lines still waiting for a slot go back unsent, their attempt unused; lines upstream keep theirs', async () => {
    // Answers far slower than the drain: the 16 slots stay taken, the lines claimed past them wait.
    const { sim, env } = await setup(3_000)
    const gateway = await spawnGatewayProcess({ ...env, MULTIGRID_DRAIN_MS: '200' })
    const { key } = await newAccount(gateway.url, 'unsent')
    const lines = Array.from({ length: 60 }, (_, i) => chatLine(`u-${i}`, `unsent line ${i}`))
    const created = await fetch(`${gateway.url}/v1/batches`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
      body: jsonl(lines),
    })
    const { id } = (await created.json()) as Batch
    await waitFor('the slots taken', async () => sim.stats().inFlight === 16)
    // Lines claimed beyond the slots, waiting at the gate.
    const db = new Database(join(env.MULTIGRID_DATA_DIR, 'multigrid.sqlite'), { readonly: true })
    const running = () =>
      db
        .query<{ n: number }, [string]>(
          `SELECT count(*) AS n FROM lines WHERE batch_id = ? AND status = 'running'`,
        )
        .get(id)!.n
    await waitFor('lines waiting for a slot', async () => running() > 16)
    expect(await gateway.kill('SIGTERM')).toBe(0)
    const attempts = db
      .query<{ attempts: number; n: number }, [string]>(
        `SELECT attempts, count(*) AS n FROM lines WHERE batch_id = ? GROUP BY attempts ORDER BY attempts`,
      )
      .all(id)
    db.close()
    await sim.stop()
    // Exactly the 16 sent used an attempt; every other line, claimed or not, has none.
    expect(sim.stats().byPath['/v1/chat/completions']).toBe(16)
    expect(attempts).toEqual([
      { attempts: 0, n: 44 },
      { attempts: 1, n: 16 },
    ])
  })

  test('SIGTERM drains: in-flight lines are recorded, the rest handed back and run after restart exactly once', async () => {
    const { sim, env } = await setup(150)
    let gateway = await spawnGatewayProcess(env)
    const { key } = await newAccount(gateway.url, 'drain')
    const headers = { authorization: `Bearer ${key}` }
    const lines = Array.from({ length: 150 }, (_, i) => chatLine(`d-${i}`, `drain line ${i}`))
    const created = (await (
      await fetch(`${gateway.url}/v1/batches`, { method: 'POST', headers, body: jsonl(lines) })
    ).json()) as Batch
    await waitFor('lines upstream', async () => sim.stats().inFlight > 0)
    const started = Date.now()
    expect(await gateway.kill('SIGTERM')).toBe(0)
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(sim.stats().inFlight).toBe(0)
    gateway = await spawnGatewayProcess(env)
    try {
      const batch = await waitFor(
        'completion after restart',
        async () => {
          const b = (await (
            await fetch(`${gateway.url}/v1/batches/${created.id}`, { headers })
          ).json()) as Batch
          return FINAL_BATCH.includes(b.status) ? b : null
        },
        60_000,
      )
      expect(batch.request_counts.succeeded).toBe(150)
      // Nothing was lost and nothing ran twice: draining finished what was upstream.
      expect(sim.stats().maxPromptCount).toBe(1)
    } finally {
      await gateway.kill('SIGTERM')
      await sim.stop()
    }
  })

  test('SIGTERM lets live calls under way finish within the drain, charged; a progress stream ends cleanly; new connections are refused', async () => {
    const { sim, env } = await setup(1_500)
    let gateway = await spawnGatewayProcess({ ...env, MULTIGRID_DRAIN_MS: '5000' })
    const { account, key } = await newAccount(gateway.url, 'live-drain')
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
    const created = (await (
      await fetch(`${gateway.url}/v1/batches`, {
        method: 'POST',
        headers,
        body: jsonl([chatLine('s-1', 'one line')]),
      })
    ).json()) as Batch
    const events = await fetch(`${gateway.url}/v1/batches/${created.id}/events`, { headers })
    const streamed = events.text()
    const ask = (stream: boolean) =>
      fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          model: 'sim/chat',
          messages: [{ role: 'user', content: `live during the drain ${stream}` }],
          max_tokens: 16,
          stream,
          ...(stream && { stream_options: { include_usage: true } }),
        }),
      }).then(async (answer) => ({ status: answer.status, text: await answer.text() }))
    type Tokens = { prompt_tokens: number; completion_tokens: number }
    // What a call costs at sim/chat's prices (test/helpers/catalog.ts), from its usage.
    const priced = (usage: Tokens) =>
      new Decimal(usage.prompt_tokens)
        .times('0.50')
        .plus(new Decimal(usage.completion_tokens).times('1.50'))
        .div(1_000_000)
    const calls = [ask(false), ask(true)]
    await waitFor('both live calls upstream', async () => sim.stats().inFlight >= 2)
    const stopped = gateway.kill('SIGTERM')
    await Bun.sleep(100)
    const late = await fetch(`${gateway.url}/healthz`).then(
      () => 'answered',
      () => 'refused',
    )
    const [plain, streaming] = await Promise.all(calls)
    expect(await stopped).toBe(0)
    expect(late).toBe('refused')
    expect(plain.status).toBe(200)
    const completion = JSON.parse(plain.text) as { usage: Tokens }
    expect(completion.usage.completion_tokens).toBeGreaterThan(0)
    expect(streaming.status).toBe(200)
    expect(streaming.text.trimEnd().endsWith('data: [DONE]')).toBe(true)
    const streamedUsage = streaming.text
      .split('\n')
      .filter((line) => line.startsWith('data: {'))
      .map((line) => JSON.parse(line.slice(6)) as { usage?: Tokens | null })
      .findLast((chunk) => chunk.usage)!.usage!
    const answered = priced(completion.usage).plus(priced(streamedUsage))
    // The stream's body ended as a body does, not with a reset.
    expect(await streamed).toContain('event: batch')
    gateway = await spawnGatewayProcess(env)
    try {
      // Both answered calls were charged: the balance is below the credit by what they cost.
      const batch = await waitFor('the batch ended', async () => {
        const b = (await (
          await fetch(`${gateway.url}/v1/batches/${created.id}`, { headers })
        ).json()) as Batch
        return FINAL_BATCH.includes(b.status) ? b : null
      })
      const view = (await (await admin(gateway.url, `/accounts/${account.id}`)).json()) as Record<
        string,
        string
      >
      const live = new Decimal(10).minus(view.balance_usd).minus(batch.cost_usd)
      expect(live.toFixed()).toBe(answered.toFixed())
      expect(view.held_usd).toBe('0.000000')
    } finally {
      await gateway.kill('SIGTERM')
      await sim.stop()
    }
  })
})
