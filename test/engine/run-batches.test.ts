/** Batches run upstream against the simulator: results, order, failures, routing, pools, faults. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import {
  chatLine,
  embedLine,
  jsonl,
  startTestGateway,
  STORES,
  type TestGateway,
} from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

type Batch = {
  id: string
  status: string
  request_counts: Record<string, number>
  cost_usd: string
  cost_ceiling_usd: string
}
type Result = {
  custom_id: string
  line: number
  status: string
  response: { status_code: number; body: any } | null
  error: { code: string; message: string; upstream?: any } | null
  cost_usd: string
  provider: string
  attempts: number
}

async function finished(gw: TestGateway, key: string, id: string, timeoutMs = 30_000) {
  return waitFor(
    `batch ${id} to finish`,
    async () => {
      const batch = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
      return FINAL_BATCH.includes(batch.status) ? batch : null
    },
    timeoutMs,
  )
}

async function results(gw: TestGateway, key: string, id: string, query = '') {
  const text = await (await gw.request(`/v1/batches/${id}/results${query}`, key)).text()
  return text.trim()
    ? text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Result)
    : []
}

for (const storeKind of STORES) {
  describe(`running batches (${storeKind})`, () => {
    let sim: Simulator
    let claude: Simulator
    let gw: TestGateway

    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 5 })
      claude = await startSimulator({ latencyMs: 5, requireApiKey: 'sk-ant-test-secret' })
      gw = await startTestGateway({
        store: storeKind,
        upstreams: { openai: `${sim.url}/v1`, anthropic: claude.url },
        env: { MULTIGRID_POLL_MS: '50' },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await sim.stop()
      await claude.stop()
    })

    test('a chat batch completes with the right result on every line, in submitted order', async () => {
      const { key } = await gw.newAccount('1')
      const lines = Array.from({ length: 60 }, (_, i) =>
        chatLine(`q-${i}`, `question number ${i}: what is ${i} + ${i}?`),
      )
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      const batch = await finished(gw, key, created.id)
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toMatchObject({
        total: 60,
        succeeded: 60,
        pending: 0,
        running: 0,
        failed: 0,
      })
      const rows = await results(gw, key, created.id)
      expect(rows.map((r) => r.custom_id)).toEqual(lines.map((l) => l.custom_id))
      expect(rows.map((r) => r.line)).toEqual(lines.map((_, i) => i + 1))
      // The simulator is deterministic: each line's answer is what the same request gets directly.
      for (const index of [0, 17, 59]) {
        const direct = (await (
          await fetch(`${sim.url}/v1/chat/completions`, {
            method: 'POST',
            body: JSON.stringify({ ...lines[index].body, model: 'sim-chat' }),
          })
        ).json()) as any
        expect(rows[index].response!.body.choices[0].message.content).toBe(
          direct.choices[0].message.content,
        )
        expect(rows[index].response!.body.usage).toEqual(direct.usage)
      }
      expect(
        rows.every(
          (r) =>
            r.status === 'succeeded' && r.response!.status_code === 200 && r.provider === 'sim',
        ),
      ).toBe(true)
    })

    test('an embeddings batch completes, billed for input tokens only', async () => {
      const { key, accountId } = await gw.newAccount('1')
      const lines = Array.from({ length: 20 }, (_, i) =>
        embedLine(`e-${i}`, [`passage ${i}`, `another passage ${i}`]),
      )
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      expect((await finished(gw, key, created.id)).status).toBe('completed')
      const rows = await results(gw, key, created.id)
      expect(rows.map((r) => r.custom_id)).toEqual(lines.map((l) => l.custom_id))
      let total = new Decimal(0)
      for (const row of rows) {
        expect(row.response!.body.data).toHaveLength(2)
        const expected = new Decimal(row.response!.body.usage.prompt_tokens).times('0.02').div(1e6)
        expect(new Decimal(row.cost_usd).equals(expected)).toBe(true)
        total = total.plus(expected)
      }
      const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as {
        balance_usd: string
        held_usd: string
      }
      expect(account.held_usd).toBe('0.000000')
      expect(new Decimal(1).minus(account.balance_usd).equals(total)).toBe(true)
    })

    test('balance arithmetic is exact: each line billed from usage, the account charged the sum', async () => {
      const { key, accountId } = await gw.newAccount('0.5')
      const lines = Array.from({ length: 25 }, (_, i) =>
        chatLine(`m-${i}`, 'price me '.repeat(i + 1), { max_tokens: 10 + i }),
      )
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      const batch = await finished(gw, key, created.id)
      const rows = await results(gw, key, created.id)
      let sum = new Decimal(0)
      for (const row of rows) {
        const usage = row.response!.body.usage
        // (prompt × 0.50 + completion × 1.50) / 1e6, exactly.
        const expected = new Decimal(usage.prompt_tokens)
          .times('0.5')
          .plus(new Decimal(usage.completion_tokens).times('1.5'))
          .div(1e6)
        expect(new Decimal(row.cost_usd).equals(expected)).toBe(true)
        sum = sum.plus(expected)
      }
      expect(new Decimal(batch.cost_usd).equals(sum)).toBe(true)
      expect(sum.lessThanOrEqualTo(batch.cost_ceiling_usd)).toBe(true)
      const account = (await (await gw.admin(`/accounts/${accountId}`)).json()) as Record<
        string,
        string
      >
      // The balance is the credit minus the exact sum, to the last digit; nothing stays held.
      expect(new Decimal(account.balance_usd).equals(new Decimal('0.5').minus(sum))).toBe(true)
      expect(account.held_usd).toBe('0.000000')
    })

    test('filter=failed returns exactly the lines the upstream refused, with its body', async () => {
      const { key } = await gw.newAccount('1')
      const lines = Array.from({ length: 12 }, (_, i) =>
        chatLine(`f-${i}`, `line ${i}`, {}, i % 3 === 1 ? 'sim/refused' : 'sim/chat'),
      )
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      const batch = await finished(gw, key, created.id)
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toMatchObject({ succeeded: 8, failed: 4 })
      const failed = await results(gw, key, created.id, '?filter=failed')
      expect(failed.map((r) => r.custom_id)).toEqual(['f-1', 'f-4', 'f-7', 'f-10'])
      for (const row of failed) {
        expect(row.status).toBe('failed')
        expect(row.error!.code).toBe('invalid_request')
        expect(row.error!.upstream).toBeDefined()
        expect(row.attempts).toBe(1) // a 4xx is never retried
        expect(row.cost_usd).toBe('0.000000')
      }
      const succeeded = await results(gw, key, created.id, '?filter=succeeded')
      expect(succeeded).toHaveLength(8)
      const resubmit = await (
        await gw.request(`/v1/batches/${created.id}/results?filter=failed&format=input`, key)
      ).text()
      expect(resubmit).toBe(jsonl(lines.filter((_, i) => i % 3 === 1)))
    })

    test('anthropic lines are translated to the Messages API and back', async () => {
      const { key } = await gw.newAccount('1')
      const line = {
        custom_id: 'c-1',
        method: 'POST',
        url: '/v1/chat/completions',
        body: {
          model: 'sim/claude',
          max_tokens: 40,
          messages: [
            { role: 'system', content: 'Be brief.' },
            { role: 'user', content: 'Say hello' },
          ],
        },
      }
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl([line]) })
      ).json()) as Batch
      expect((await finished(gw, key, created.id)).status).toBe('completed')
      const [row] = await results(gw, key, created.id)
      expect(row.provider).toBe('sim-anthropic')
      expect(row.response!.body.object).toBe('chat.completion')
      expect(typeof row.response!.body.choices[0].message.content).toBe('string')
      expect(['stop', 'length']).toContain(row.response!.body.choices[0].finish_reason)
      expect(row.response!.body.usage.prompt_tokens).toBeGreaterThan(0)
    })
  })
}

describe('routing, pools and faults', () => {
  test('a provider object falls back to the next offering when the first cannot serve', async () => {
    const sim = await startSimulator({ latencyMs: 2 })
    // The anthropic offering points at a closed port: every call is a connection error.
    const gw = await startTestGateway({
      upstreams: { openai: `${sim.url}/v1`, anthropic: 'http://127.0.0.1:9' },
      env: { MULTIGRID_POLL_MS: '50' },
    })
    try {
      const { key } = await gw.newAccount('1')
      const lines = [
        chatLine(
          'fb-1',
          'hi',
          { provider: { order: ['sim-anthropic', 'sim'], allow_fallbacks: true } },
          'sim/multi',
        ),
        chatLine('fb-2', 'hi', { provider: { only: ['sim'] } }, 'sim/multi'),
      ]
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      // Input: the larger body sent (line 1: 84 bytes as Anthropic's, 81 as sim's; line 2: 81 as
      // sim's) + 4 per message + 3 priming. Priced at the dearest offering each line may reach:
      // line 1 may reach sim-anthropic (3/15), line 2 only sim (0.5/1.5).
      expect(created.cost_ceiling_usd).toBe(
        new Decimal(91 * 3 + 32 * 15)
          .plus(88 * 0.5 + 32 * 1.5)
          .div(1e6)
          .toFixed(6, Decimal.ROUND_UP),
      )
      expect((await finished(gw, key, created.id)).status).toBe('completed')
      const rows = await results(gw, key, created.id)
      expect(rows.map((r) => [r.custom_id, r.status, r.provider])).toEqual([
        ['fb-1', 'succeeded', 'sim'],
        ['fb-2', 'succeeded', 'sim'],
      ])
    } finally {
      await gw.stop()
      await sim.stop()
    }
  })

  test('an upstream that pretty-prints its JSON still gives one result per line, body intact', async () => {
    // Some OpenAI-compatible servers indent their answers; results are JSONL, one line each.
    const upstream = Bun.serve({
      hostname: '127.0.0.1',
      port: 0,
      async fetch(request) {
        const body = (await request.json()) as { model: string; messages: { content: string }[] }
        const answer = {
          id: 'chatcmpl-pretty',
          object: 'chat.completion',
          created: 1,
          model: body.model,
          choices: [
            {
              index: 0,
              message: { role: 'assistant', content: `echo: ${body.messages[0].content}` },
              finish_reason: 'stop',
            },
          ],
          usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 },
        }
        return new Response(JSON.stringify(answer, null, 2), {
          headers: { 'content-type': 'application/json' },
        })
      },
    })
    const gw = await startTestGateway({
      upstreams: { openai: `http://127.0.0.1:${upstream.port}/v1` },
      env: { MULTIGRID_POLL_MS: '50' },
    })
    try {
      const { key } = await gw.newAccount('1')
      const created = (await (
        await gw.request('/v1/batches', key, {
          method: 'POST',
          body: jsonl([chatLine('p-1', 'one'), chatLine('p-2', 'two')]),
        })
      ).json()) as Batch
      expect((await finished(gw, key, created.id)).status).toBe('completed')
      const rows = await results(gw, key, created.id)
      expect(
        rows.map((r) => [
          r.custom_id,
          r.response?.body.choices[0].message.content,
          r.response?.body.usage.total_tokens,
        ]),
      ).toEqual([
        ['p-1', 'echo: one', 8],
        ['p-2', 'echo: two', 8],
      ])
    } finally {
      await gw.stop()
      upstream.stop(true)
    }
  })

  test('a pool of 3 replicas with one killed mid-batch still completes every line', async () => {
    const replicas = await Promise.all([0, 1, 2].map(() => startSimulator({ latencyMs: 20 })))
    const gw = await startTestGateway({
      catalog: testCatalog({ openai: replicas.map((r) => `${r.url}/v1`) }, { maxConcurrency: 12 }),
      env: { MULTIGRID_POLL_MS: '50' },
    })
    try {
      const { key } = await gw.newAccount('5')
      const lines = Array.from({ length: 300 }, (_, i) => chatLine(`p-${i}`, `pool line ${i}`))
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      await waitFor(
        'some progress',
        async () =>
          ((await (await gw.request(`/v1/batches/${created.id}`, key)).json()) as Batch)
            .request_counts.succeeded > 30,
      )
      await replicas[1].stop()
      const batch = await finished(gw, key, created.id, 60_000)
      expect(batch.status).toBe('completed')
      expect(batch.request_counts.succeeded).toBe(300)
      const served = replicas.map((r) => r.stats().byPath['/v1/chat/completions'] ?? 0)
      expect(served[0] + served[1] + served[2]).toBeGreaterThanOrEqual(300)
      expect(served[0]).toBeGreaterThan(0)
      expect(served[2]).toBeGreaterThan(0)
    } finally {
      await gw.stop()
      await Promise.all([replicas[0].stop(), replicas[2].stop()])
    }
  })

  test('one huge batch does not starve a small one of another account; a batch where nothing ran is failed', async () => {
    const sim = await startSimulator({ latencyMs: 20 })
    const gw = await startTestGateway({
      catalog: testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 8 }),
      env: { MULTIGRID_POLL_MS: '20' },
    })
    try {
      const big = await gw.newAccount('10')
      const small = await gw.newAccount('10')
      const huge = (await (
        await gw.request('/v1/batches', big.key, {
          method: 'POST',
          body: jsonl(Array.from({ length: 1500 }, (_, i) => chatLine(`h-${i}`, `huge ${i}`))),
        })
      ).json()) as Batch
      await waitFor(
        'the huge batch to be running',
        async () =>
          ((await (await gw.request(`/v1/batches/${huge.id}`, big.key)).json()) as Batch)
            .request_counts.succeeded > 20,
      )
      const started = Date.now()
      const tiny = (await (
        await gw.request('/v1/batches', small.key, {
          method: 'POST',
          body: jsonl(Array.from({ length: 10 }, (_, i) => chatLine(`t-${i}`, `tiny ${i}`))),
        })
      ).json()) as Batch
      expect((await finished(gw, small.key, tiny.id)).status).toBe('completed')
      const tinyTook = Date.now() - started
      const hugeNow = (await (await gw.request(`/v1/batches/${huge.id}`, big.key)).json()) as Batch
      // 1,500 lines at 8 in flight and 20 ms take ≥ 3.7 s; the small batch is done long before.
      expect(hugeNow.status).toBe('in_progress')
      expect(tinyTook).toBeLessThan(2_000)

      const refused = (await (
        await gw.request('/v1/batches', small.key, {
          method: 'POST',
          body: jsonl([
            chatLine('x-1', 'a', {}, 'sim/refused'),
            chatLine('x-2', 'b', {}, 'sim/refused'),
          ]),
        })
      ).json()) as Batch
      const ended = await finished(gw, small.key, refused.id)
      expect(ended.status).toBe('failed')
      expect(ended.request_counts).toMatchObject({ failed: 2, succeeded: 0 })
      await gw.request(`/v1/batches/${huge.id}`, big.key, { method: 'DELETE' })
    } finally {
      await gw.stop()
      await sim.stop()
    }
  })

  test('with 20% errors and 10% 429s every line still completes within the retry budget', async () => {
    const sim = await startSimulator({
      latencyMs: 2,
      errorRate: 0.2,
      rate429: 0.1,
      retryAfterSeconds: 0.05,
      seed: 7,
    })
    const gw = await startTestGateway({
      upstreams: { openai: `${sim.url}/v1` },
      env: { MULTIGRID_POLL_MS: '20' },
    })
    try {
      const { key } = await gw.newAccount('5')
      const lines = Array.from({ length: 200 }, (_, i) => chatLine(`r-${i}`, `retry line ${i}`))
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      const batch = await finished(gw, key, created.id, 60_000)
      expect(batch.request_counts).toMatchObject({ succeeded: 200, failed: 0 })
      const stats = sim.stats()
      expect((stats.byStatus['500'] ?? 0) + (stats.byStatus['429'] ?? 0)).toBeGreaterThan(20)
      const rows = await results(gw, key, created.id)
      expect(Math.max(...rows.map((r) => r.attempts))).toBeGreaterThan(1)
      expect(Math.max(...rows.map((r) => r.attempts))).toBeLessThanOrEqual(8)
    } finally {
      await gw.stop()
      await sim.stop()
    }
  })
})
