/**
 * A pool of two simulated vLLM replicas with max_loras 2 serving a batch that mixes a base model
 * and three fine-tunes (docs/open-models.md): every line answered by a replica that held its fine-tune (a
 * replica answers a fine-tune it does not hold 404), no replica over max_loras (a load past it is
 * refused and counted), each fine-tune loaded no more often than needed; and one replica restarted
 * mid-batch, losing its fine-tunes, with every line still succeeding.
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

    /** A new account with three fine-tunes, and a batch mixing them with the base, round robin. */
    async function mixedBatch(lines: number) {
      const { accountId, key } = await gw.newAccount('10')
      const fineTunes: string[] = []
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
        fineTunes.push(((await response.json()) as { id: string }).id)
      }
      const models = [LORA_BASE, ...fineTunes]
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
      return { key, id, fineTunes }
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

    test('every line answered by a replica holding its fine-tune, none over max_loras, each fine-tune loaded once', async () => {
      for (const sim of sims) sim.resetStats()
      const { key, id, fineTunes } = await mixedBatch(80)
      const batch = await finished(key, id)
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toMatchObject({ total: 80, succeeded: 80, failed: 0 })
      const results = await resultsOf(key, id)
      results.forEach((result, i) => {
        expect(result.status).toBe('succeeded')
        expect(result.response.body.model).toBe(
          i % 4 === 0 ? LORA_UPSTREAM_MODEL : fineTunes[(i % 4) - 1],
        )
      })
      for (const sim of sims) {
        const lora = sim.lora()
        expect(lora.maxLoaded).toBeLessThanOrEqual(MAX_LORAS)
        expect(lora.refusedFull).toBe(0)
        // No request for a fine-tune reached a replica that did not hold it.
        expect(lora.missing).toBe(0)
      }
      // Three fine-tunes fit the pool's four places: each is loaded once and stays.
      for (const fineTune of fineTunes) {
        expect(loadsOf(fineTune)).toBe(1)
        expect(unloadsOf(fineTune)).toBe(0)
        expect(servedOf(fineTune)).toBe(20)
      }
    })

    test('a replica that restarted between batches answers 404 for its fine-tune: loaded again, not a failed attempt', async () => {
      const first = await mixedBatch(8)
      expect((await finished(first.key, first.id)).status).toBe('completed')
      for (const sim of sims) sim.resetStats()
      // Back at once, holding nothing: the gateway still thinks it holds what it loaded there.
      for (const sim of sims) await sim.restart(0)
      const { key, id } = await gw
        .request('/v1/batches', first.key, {
          method: 'POST',
          body: jsonl(
            first.fineTunes.map((model, i) => chatLine(`again-${i}`, 'again', {}, model)),
          ),
          headers: { 'content-type': 'application/jsonl' },
        })
        .then(async (response) => ({
          key: first.key,
          ...((await response.json()) as { id: string }),
        }))
      expect((await finished(key, id)).status).toBe('completed')
      const results = await resultsOf(key, id)
      expect(results.map((r) => [r.status, r.attempts])).toEqual(
        first.fineTunes.map(() => ['succeeded', 1]),
      )
      // Each was asked for where it had been, refused 404, loaded there again: once.
      expect(sims.reduce((sum, sim) => sum + sim.lora().missing, 0)).toBe(3)
      for (const fineTune of first.fineTunes) expect(loadsOf(fineTune)).toBe(1)
    })

    test('a replica restarted mid-batch loses its fine-tunes: they are loaded again, and every line succeeds', async () => {
      for (const sim of sims) sim.resetStats()
      const { key, id, fineTunes } = await mixedBatch(160)
      await waitFor('a quarter of the batch', async () => {
        const batch = await batchOf(key, id)
        return batch.request_counts.succeeded >= 40
      })
      // A replica holding at least one of this batch's fine-tunes (earlier tests' may be there too).
      const holding = (sim: Simulator) => sim.lora().loaded.filter((a) => fineTunes.includes(a))
      const restarted = await waitFor('a replica holding a fine-tune', async () =>
        sims.find((sim) => holding(sim).length > 0),
      )
      const lost = holding(restarted)
      const loadsBefore = Object.fromEntries(fineTunes.map((a) => [a, loadsOf(a)]))
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
      // Every load past the first is explained: the fine-tune was lost in the restart, or
      // unloaded to make room while its replica was out (it moved to the other one meanwhile).
      for (const fineTune of fineTunes) {
        // Loaded once before the restart, or (a slow load) not yet.
        expect(loadsBefore[fineTune]).toBeLessThanOrEqual(1)
        const explained = 1 + unloadsOf(fineTune) + (lost.includes(fineTune) ? 1 : 0)
        expect(loadsOf(fineTune)).toBeLessThanOrEqual(explained)
      }
    })

    test('replicas full of fine-tunes another gateway loaded: one of those makes room, every line succeeds', async () => {
      for (const sim of sims) await sim.restart(0)
      // Another instance (or the gateway before a restart) filled every place.
      for (const sim of sims)
        for (const name of ['foreign-a', 'foreign-b']) {
          const loaded = await fetch(`${sim.url}/v1/load_lora_adapter`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ lora_name: name, lora_path: `/srv/lora/${name}` }),
          })
          expect(loaded.status).toBe(200)
        }
      for (const sim of sims) sim.resetStats()
      const { key, id } = await mixedBatch(8)
      const batch = await finished(key, id)
      expect(batch.status).toBe('completed')
      expect(batch.request_counts).toMatchObject({ total: 8, succeeded: 8, failed: 0 })
      expect(unloadsOf('foreign-a') + unloadsOf('foreign-b')).toBeGreaterThan(0)
      for (const sim of sims) expect(sim.lora().maxLoaded).toBeLessThanOrEqual(MAX_LORAS)
    })
  })
}
