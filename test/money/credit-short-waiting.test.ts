/**
 * A running batch whose account's balance falls below what its open batches hold (here: the
 * operator takes credit away; docs/money-and-limits.md#credit), over real HTTP: it stays
 * in_progress, says waiting insufficient_credit with the shortfall, sends no more lines, and its
 * pending lines count in multigrid_queue_depth; a deposit that covers the holds clears the reason
 * and the batch completes, each line billed once.
 */
import { afterEach, describe, expect, test } from 'bun:test'
import Decimal from 'decimal.js'
import { usd } from '../../src/money/decimal.ts'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { parsePrometheusText, sampleValue } from '../helpers/prometheus-text.ts'
import { waitFor } from '../helpers/wait.ts'

type Batch = {
  id: string
  status: string
  cost_ceiling_usd: string
  request_counts: Record<string, number>
  waiting: { code: string; message: string } | null
}
type Account = { balance_usd: string; held_usd: string }

const LINES = 6
const CREDIT = '1'
const lines = Array.from({ length: LINES }, (_, i) => ({
  custom_id: `c-${i + 1}`,
  method: 'POST',
  url: '/v1/chat/completions',
  body: {
    model: 'sim/chat',
    messages: [{ role: 'user', content: `short ${i + 1}` }],
    max_tokens: 16,
  },
}))

for (const storeKind of STORES) {
  describe(`a running batch whose account falls short of its holds (${storeKind})`, () => {
    let sim: Simulator | undefined
    let gw: TestGateway | undefined
    afterEach(async () => {
      await gw?.stop()
      await sim?.stop()
    })

    /**
     * A batch of LINES running one line at a time, until a line has succeeded; then the operator
     * takes credit away, leaving the balance at half of what the batch holds.
     */
    async function runThenTakeCredit() {
      sim = await startSimulator({ latencyMs: 300 })
      gw = await startTestGateway({
        store: storeKind,
        catalog: testCatalog({ openai: `${sim.url}/v1` }, { maxConcurrency: 1 }),
        env: { MULTIGRID_POLL_MS: '50' },
      })
      const { key, accountId } = await gw.newAccount(CREDIT)
      const created = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl(lines) })
      ).json()) as Batch
      const run = {
        account: async () => (await (await gw!.admin(`/accounts/${accountId}`)).json()) as Account,
        batch: async () =>
          (await (await gw!.request(`/v1/batches/${created.id}`, key)).json()) as Batch,
        results: async () =>
          (await (await gw!.request(`/v1/batches/${created.id}/results`, key)).text())
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l) as { cost_usd: string }),
        sent: () => sim!.stats().byPath['/v1/chat/completions'] ?? 0,
        removed: '',
        accountId,
      }
      await waitFor('a line to succeed', async () =>
        (await run.batch()).request_counts.succeeded > 0 ? true : null,
      )
      const before = await run.account()
      run.removed = new Decimal(before.balance_usd)
        .minus(new Decimal(before.held_usd).div(2))
        .toFixed(6, Decimal.ROUND_DOWN)
      const corrected = await gw.admin(`/accounts/${accountId}/credits`, {
        body: { amount_usd: `-${run.removed}` },
      })
      expect(corrected.status).toBe(200)
      return run
    }

    test('waits insufficient_credit with the shortfall, sends nothing more, and completes after a deposit, billed once', async () => {
      const run = await runThenTakeCredit()
      // The line in flight finishes; the batch then says why it waits, with the shortfall.
      const stalled = await waitFor(
        'the batch to wait for credit',
        async () => {
          const now = await run.batch()
          const view = await run.account()
          const shortfall = usd(new Decimal(view.held_usd).minus(view.balance_usd))
          return now.request_counts.running === 0 &&
            now.waiting?.code === 'insufficient_credit' &&
            now.waiting.message.includes(`$${shortfall}`)
            ? now
            : null
        },
        20_000,
      )
      expect(stalled.status).toBe('in_progress')
      expect(stalled.request_counts.pending).toBeGreaterThan(0)
      expect(stalled.waiting!.message).toContain('deposit')
      const sentWhenShort = run.sent()
      await Bun.sleep(800) // and nothing more goes upstream
      expect(run.sent()).toBe(sentWhenShort)
      const still = await run.batch()
      expect(still.status).toBe('in_progress')
      expect(still.request_counts.succeeded).toBe(stalled.request_counts.succeeded)
      expect(still.waiting?.code).toBe('insufficient_credit')

      // A deposit that covers the holds: the reason clears and the batch runs to its end.
      await gw!.admin(`/accounts/${run.accountId}/credits`, { body: { amount_usd: '1' } })
      const resumed = await waitFor('the reason to clear', async () => {
        const now = await run.batch()
        return now.waiting === null ? now : null
      })
      expect(resumed.status).not.toBe('failed')
      const finished = await waitFor(
        'the batch to complete',
        async () => {
          const now = await run.batch()
          return now.status === 'completed' ? now : null
        },
        30_000,
      )
      expect(finished.waiting).toBeNull()
      expect(finished.request_counts.succeeded).toBe(LINES)
      expect(run.sent()).toBe(LINES)
      const billed = (await run.results()).reduce((sum, r) => sum.plus(r.cost_usd), new Decimal(0))
      const view = await run.account()
      // Charged exactly what the lines record: once each.
      const paidIn = new Decimal(CREDIT).minus(run.removed).plus(1)
      expect(paidIn.minus(view.balance_usd).equals(billed)).toBe(true)
      expect(new Decimal(view.held_usd).isZero()).toBe(true)
    }, 60_000)

    test('its pending lines count in multigrid_queue_depth while it waits', async () => {
      const run = await runThenTakeCredit()
      const stalled = await waitFor(
        'dispatch to stop for the account',
        async () => {
          const now = await run.batch()
          const view = await run.account()
          return now.request_counts.running === 0 &&
            new Decimal(view.balance_usd).lessThan(view.held_usd)
            ? now
            : null
        },
        20_000,
      )
      expect(stalled.request_counts.pending).toBeGreaterThan(0)
      const metrics = parsePrometheusText(await (await fetch(`${gw!.url}/metrics`)).text())
      expect(sampleValue(metrics, 'multigrid_queue_depth')).toBe(stalled.request_counts.pending)
    }, 60_000)
  })
}
