/**
 * An upstream that reports more usage than a line's ceiling allows (docs/money-and-limits.md, over real HTTP):
 * the line is billed its real cost, the overrun is logged without the prompt, the balance never
 * goes below zero, the account is charged exactly what its lines record, and once its balance
 * no longer covers what it holds no more of its lines go upstream until a deposit covers them.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.ts'
import { waitFor } from '../helpers/wait.ts'

type Batch = {
  id: string
  status: string
  cost_usd: string
  cost_ceiling_usd: string
  request_counts: Record<string, number>
}
type Result = { custom_id: string; status: string; cost_usd?: string }
type Account = { balance_usd: string; held_usd: string }

const PROMPT = 'overrun probe'
const LINES = 9
const lines = Array.from({ length: LINES }, (_, i) => ({
  custom_id: `o-${i + 1}`,
  method: 'POST',
  url: '/v1/chat/completions',
  body: {
    model: 'sim/chat',
    messages: [{ role: 'user', content: `${PROMPT} ${i + 1}` }],
    max_tokens: 32,
  },
}))

for (const storeKind of STORES) {
  describe(`usage above the ceiling (${storeKind})`, () => {
    let sim: Simulator | undefined
    let gw: TestGateway | undefined
    afterEach(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    test('is billed in full and logged; the account stops being dispatched once its balance cannot cover its holds', async () => {
      // Usage reported 50× the honest count: a line quoted at ~0.0001 costs ~0.001.
      sim = await startSimulator({ usageFactor: 50 })
      const logLines: string[] = []
      gw = await startTestGateway({
        store: storeKind,
        // One line upstream at a time, so the stop shows between lines.
        catalog: testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 1 }),
        env: { MULTIGRID_POLL_MS: '50' },
        logLines,
      })
      const file = jsonl(lines)
      const { key: quoteKey } = await gw.newAccount('1')
      const quote = new Decimal(
        (
          (await (
            await gw.request('/v1/batches?dry_run=true', quoteKey, { method: 'POST', body: file })
          ).json()) as Batch
        ).cost_ceiling_usd,
      )
      // Credit: the hold plus room for about two overrunning lines.
      const credit = quote.plus('0.002')
      const { key, accountId } = await gw.newAccount(credit.toFixed())
      const account = async () =>
        (await (await gw!.admin(`/accounts/${accountId}`)).json()) as Account
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: file })
      ).json()) as Batch
      const batch = async () =>
        (await (await gw!.request(`/v1/batches/${created.id}`, key)).json()) as Batch
      const results = async () =>
        (await (await gw!.request(`/v1/batches/${created.id}/results`, key)).text())
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Result)

      // Dispatch stops: nothing running, lines left pending, the balance short of the holds.
      const stalled = await waitFor(
        'dispatch to stop for the account',
        async () => {
          const now = await batch()
          const view = await account()
          return now.request_counts.running === 0 &&
            now.request_counts.succeeded > 0 &&
            new Decimal(view.balance_usd).lessThan(view.held_usd)
            ? now
            : null
        },
        20_000,
      )
      expect(stalled.request_counts.pending).toBeGreaterThan(0)
      await Bun.sleep(500) // and it stays stopped
      expect((await batch()).request_counts.succeeded).toBe(stalled.request_counts.succeeded)

      let view = await account()
      expect(new Decimal(view.balance_usd).isNegative()).toBe(false)
      const done = (await results()).filter((r) => r.status === 'succeeded')
      const perLineCeiling = quote.div(LINES)
      // The first line was billed its real cost, far above its ceiling.
      expect(new Decimal(done[0]!.cost_usd!).greaterThan(perLineCeiling.times(5))).toBe(true)
      // Charged exactly what the lines record.
      const recorded = done.reduce((sum, r) => sum.plus(r.cost_usd!), new Decimal(0))
      expect(credit.minus(view.balance_usd).equals(recorded)).toBe(true)

      // Each overrun is a warn log with the batch, line, ceiling and cost — and no prompt.
      const overruns = logLines
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .filter((l) => l.msg === 'line.cost_overrun' || l.event === 'line.cost_overrun')
      expect(overruns.length).toBe(done.length)
      for (const entry of overruns) {
        expect(entry).toMatchObject({ batch_id: created.id, level: 'warn' })
        expect(typeof entry.line).toBe('number')
        expect(new Decimal(String(entry.cost_usd)).greaterThan(String(entry.ceiling_usd))).toBe(
          true,
        )
      }
      expect(logLines.some((l) => l.includes(PROMPT))).toBe(false)

      // A deposit that covers the holds again lets the rest run.
      await gw.admin(`/accounts/${accountId}/credits`, { body: { amount_usd: '1' } })
      const finished = await waitFor(
        'the batch to finish',
        async () => {
          const now = await batch()
          return now.status === 'completed' ? now : null
        },
        20_000,
      )
      expect(finished.request_counts.succeeded).toBe(LINES)
      view = await account()
      const all = (await results()).reduce((sum, r) => sum.plus(r.cost_usd!), new Decimal(0))
      expect(credit.plus(1).minus(view.balance_usd).equals(all)).toBe(true)
      expect(new Decimal(view.held_usd).isZero()).toBe(true)
    }, 60_000)

    test('a line cut short at a zero balance counts in /v1/usage and /metrics at what it was charged', async () => {
      sim = await startSimulator({ usageFactor: 50 })
      gw = await startTestGateway({
        store: storeKind,
        catalog: testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 1 }),
        env: { MULTIGRID_POLL_MS: '50' },
      })
      const file = jsonl(lines.slice(0, 1))
      const { key: quoteKey } = await gw.newAccount('1')
      const quote = (
        (await (
          await gw.request('/v1/batches?dry_run=true', quoteKey, { method: 'POST', body: file })
        ).json()) as Batch
      ).cost_ceiling_usd
      // Credit for the hold alone: the line, billed ~10× its ceiling, costs more than all of it.
      const { key, accountId } = await gw.newAccount(quote)
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: file })
      ).json()) as Batch
      await waitFor(
        'the balance to reach zero',
        async () => {
          const view = (await (await gw!.admin(`/accounts/${accountId}`)).json()) as Account
          return new Decimal(view.balance_usd).isZero() ? view : null
        },
        20_000,
      )
      const results = (await (await gw.request(`/v1/batches/${created.id}/results`, key)).text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Result)
      const billed = results.filter((r) => r.status === 'succeeded')
      expect(billed.length).toBe(1)
      // Charged the whole balance, less than its list price.
      expect(billed[0]!.cost_usd).toBe(quote)

      const today = new Date().toISOString().slice(0, 10)
      // The counters hear of a line just after its write, which the balance shows first.
      const usage = await waitFor('the line in /v1/usage', async () => {
        const read = (await (
          await gw!.request(`/v1/usage?from=${today}&to=${today}&group_by=model`, key)
        ).json()) as { data: { lines: number; cost_usd: string }[] }
        return read.data.length > 0 ? read : null
      })
      expect(usage.data.map((row) => [row.lines, row.cost_usd])).toEqual([[1, quote]])
      const metrics = parsePrometheusText(await (await fetch(`${gw.url}/metrics`)).text())
      const spend = sampleValue(metrics, 'multigrid_spend_usd_total', { provider: 'sim' })!
      expect(Math.abs(spend - Number(quote))).toBeLessThan(1e-12)
    }, 60_000)
  })
}
