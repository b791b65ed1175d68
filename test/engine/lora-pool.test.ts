/**
 * A pool of two simulated vLLM replicas with max_loras 2 serving a batch that mixes a base model
 * and three adapters (docs/open-models.md): every line answered by a replica that held its adapter (a
 * replica answers an adapter it does not hold 404), no replica over max_loras (a load past it is
 * refused and counted), each adapter loaded no more often than needed; and one replica restarted
 * mid-batch, losing its adapters, with every line still succeeding.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { LORA_BASE, LORA_UPSTREAM_MODEL, loraCatalog } from '../helpers/lora-catalog.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

const MAX_LORAS = 2

for (const storeKind of STORES) {
  describe(`a LoRA pool of two replicas (${storeKind})`, () => {
    let sims: Simulator[]
    let gw: TestGateway

    beforeAll(async () => {
      sims = await Promise.all(
        [0, 1].map(() =>
          startSimulator({
            latencyMs: 15,
            maxLoras: MAX_LORAS,
            loraLoadMs: 20,
            models: [LORA_UPSTREAM_MODEL],
          }),
        ),
      )
      gw = await startTestGateway({
        store: storeKind,
        catalog: loraCatalog(
          sims.map((sim) => `${sim.url}/v1`),
          { maxLoras: MAX_LORAS, maxConcurrency: 8 },
        ),
        env: { MULTIGRID_POLL_MS: '50' },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await Promise.all(sims.map((sim) => sim.stop()))
    })

    /** A new account with three adapters, and a batch mixing them with the base, round robin. */
    async function mixedBatch(lines: number) {
      const { accountId, key } = await gw.newAccount('10')
      const adapters: string[] = []
      for (const name of ['alpha', 'beta', 'gamma']) {
        const response = await gw.admin(`/accounts/${accountId}/adapters`, {
          body: {
            base_model: LORA_BASE,
            name,
            rank: 16,
            size_mib: 64,
            source: `/srv/lora/${name}`,
          },
        })
        adapters.push(((await response.json()) as { id: string }).id)
      }
      const models = [LORA_BASE, ...adapters]
      const file = Array.from({ length: lines }, (_, i) =>
        chatLine(`l${i}`, `line ${i}`, {}, models[i % models.length]),
      )
      const created = await gw.request('/v1/batches', key, {
        method: 'POST',
        body: jsonl(file),
        headers: { 'content-type': 'application/jsonl' },
      })
      expect(created.status).toBe(201)
      const { id } = (await created.json()) as { id: string }
      return { key, id, adapters }
    }
    const batchOf = async (key: string, id: string) =>
      (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
        status: string
        request_counts: { total: number; succeeded: number; failed: number }
      }
    const finished = (key: string, id: string) =>
      waitFor(`batch ${id}`, async () => {
        const batch = await batchOf(key, id)
        return FINAL_BATCH.includes(batch.status) ? batch : null
      })
    async function resultsOf(key: string, id: string) {
      const text = await (await gw.request(`/v1/batches/${id}/results`, key)).text()
      return text
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { status: string; attempts: number; response: any })
    }
    const loadsOf = (name: string) =>
      sims.reduce((sum, sim) => sum + (sim.lora().loads[name] ?? 0), 0)
    const unloadsOf = (name: string) =>
      sims.reduce((sum, sim) => sum + (sim.lora().unloads[name] ?? 0), 0)
    const servedOf = (name: string) =>
      sims.reduce((sum, sim) => sum + (sim.lora().served[name] ?? 0), 0)

    test('every line answered by a replica holding its adapter, none over max_loras, each adapter loaded once', async () => {
      for (const sim of sims) sim.resetStats()
      const { key, id, adapters } = await mixedBatch(80)
      const batch = await finished(key, id)
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toMatchObject({ total: 80, succeeded: 80, failed: 0 })
      const results = await resultsOf(key, id)
      results.forEach((result, i) => {
        expect(result.status).toBe('succeeded')
        expect(result.response.body.model).toBe(
          i % 4 === 0 ? LORA_UPSTREAM_MODEL : adapters[(i % 4) - 1],
        )
      })
      for (const sim of sims) {
        const lora = sim.lora()
        expect(lora.maxLoaded).toBeLessThanOrEqual(MAX_LORAS)
        expect(lora.refusedFull).toBe(0)
        // No request for an adapter reached a replica that did not hold it.
        expect(lora.missing).toBe(0)
      }
      // Three adapters fit the pool's four places: each is loaded once and stays.
      for (const adapter of adapters) {
        expect(loadsOf(adapter)).toBe(1)
        expect(unloadsOf(adapter)).toBe(0)
        expect(servedOf(adapter)).toBe(20)
      }
    })

    test('a replica that restarted between batches answers 404 for its adapter: loaded again, not a failed attempt', async () => {
      const first = await mixedBatch(8)
      expect((await finished(first.key, first.id)).status).toBe('completed')
      for (const sim of sims) sim.resetStats()
      // Back at once, holding nothing: the gateway still thinks it holds what it loaded there.
      for (const sim of sims) await sim.restart(0)
      const { key, id } = await gw
        .request('/v1/batches', first.key, {
          method: 'POST',
          body: jsonl(first.adapters.map((model, i) => chatLine(`again-${i}`, 'again', {}, model))),
          headers: { 'content-type': 'application/jsonl' },
        })
        .then(async (response) => ({
          key: first.key,
          ...((await response.json()) as { id: string }),
        }))
      expect((await finished(key, id)).status).toBe('completed')
      const results = await resultsOf(key, id)
      expect(results.map((r) => [r.status, r.attempts])).toEqual(
        first.adapters.map(() => ['succeeded', 1]),
      )
      // Each was asked for where it had been, refused 404, loaded there again: once.
      expect(sims.reduce((sum, sim) => sum + sim.lora().missing, 0)).toBe(3)
      for (const adapter of first.adapters) expect(loadsOf(adapter)).toBe(1)
    })

    test('a replica restarted mid-batch loses its adapters: they are loaded again, and every line succeeds', async () => {
      for (const sim of sims) sim.resetStats()
      const { key, id, adapters } = await mixedBatch(160)
      await waitFor('a quarter of the batch', async () => {
        const batch = await batchOf(key, id)
        return batch.request_counts.succeeded >= 40
      })
      // A replica holding at least one of this batch's adapters (earlier tests' may be there too).
      const holding = (sim: Simulator) => sim.lora().loaded.filter((a) => adapters.includes(a))
      const restarted = await waitFor('a replica holding an adapter', async () =>
        sims.find((sim) => holding(sim).length > 0),
      )
      const lost = holding(restarted)
      const loadsBefore = Object.fromEntries(adapters.map((a) => [a, loadsOf(a)]))
      await restarted.restart(50)
      const batch = await finished(key, id)
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toMatchObject({ total: 160, succeeded: 160, failed: 0 })
      const results = await resultsOf(key, id)
      expect(results.every((r) => r.status === 'succeeded')).toBe(true)
      for (const sim of sims) {
        expect(sim.lora().maxLoaded).toBeLessThanOrEqual(MAX_LORAS)
        expect(sim.lora().refusedFull).toBe(0)
      }
      // Every load past the first is explained: the adapter was lost in the restart, or
      // unloaded to make room while its replica was out (it moved to the other one meanwhile).
      for (const adapter of adapters) {
        // Loaded once before the restart, or (a slow load) not yet.
        expect(loadsBefore[adapter]).toBeLessThanOrEqual(1)
        const explained = 1 + unloadsOf(adapter) + (lost.includes(adapter) ? 1 : 0)
        expect(loadsOf(adapter)).toBeLessThanOrEqual(explained)
      }
    })
  })
}
