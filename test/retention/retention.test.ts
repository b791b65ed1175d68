/** Retention: results deleted 30 days after their batch ended, uploads 7 days after last use, once. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startSimulator, type Simulator } from '../../src/simulator/server.ts'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'
import { createFacadeBatch } from '../helpers/facade-batch.ts'

const DAY = 86_400

for (const storeKind of STORES) {
  describe(`retention (${storeKind})`, () => {
    let sim: Simulator
    let gw: TestGateway
    beforeAll(async () => {
      sim = await startSimulator({ latencyMs: 1 })
      gw = await startTestGateway({
        store: storeKind,
        upstreams: { openai: `${sim.url}/v1` },
        env: { MULTIGRID_POLL_MS: '50' },
      })
    })
    afterAll(async () => {
      await gw.stop()
      await sim.stop()
    })

    test('after the retention periods results and uploads are gone, the batch record stays, and no run does the work twice', async () => {
      const { key } = await gw.newAccount('1', {}, { max_open_batches: 20 })
      const facade = await createFacadeBatch(gw, key, jsonl([chatLine('a'), chatLine('b')]))
      const file = { id: facade.input_file_id }
      const native = (await (
        await gw.request('/v1/batches', key, { method: 'POST', body: jsonl([chatLine('c')]) })
      ).json()) as { id: string }
      let output = ''
      for (const id of [facade.id, native.id]) {
        await waitFor(`batch ${id}`, async () => {
          const batch = (await (await gw.request(`/openai/v1/batches/${id}`, key)).json()) as {
            status: string
            output_file_id: string
          }
          if (id === facade.id) output = batch.output_file_id
          return FINAL_BATCH.includes(batch.status)
        })
      }
      expect((await gw.request(`/openai/v1/files/${output}/content`, key)).status).toBe(200)

      // Nothing is due yet.
      const now = Math.floor(Date.now() / 1000)
      expect(await gw.janitor.runOnce(now + 6 * DAY)).toMatchObject({
        purgedBatches: [],
        deletedFiles: [],
      })
      expect((await gw.request(`/openai/v1/files/${file.id}`, key)).status).toBe(200)

      // Two passes at once, as two instances would run them: each item is deleted once.
      const later = now + 31 * DAY
      const [first, second] = await Promise.all([
        gw.janitor.runOnce(later),
        gw.janitor.runOnce(later),
      ])
      const purged = [...first.purgedBatches, ...second.purgedBatches]
      expect(purged.sort()).toEqual([facade.id, native.id].sort())
      expect([...first.deletedFiles, ...second.deletedFiles]).toEqual([file.id])

      const results = await gw.request(`/v1/batches/${native.id}/results`, key)
      expect(results.status).toBe(410)
      expect(((await results.json()) as { error: { code: string } }).error.code).toBe(
        'results_expired',
      )
      expect((await gw.request(`/openai/v1/files/${output}/content`, key)).status).toBe(404)
      expect((await gw.request(`/openai/v1/files/${file.id}/content`, key)).status).toBe(404)
      const kept = (await (await gw.request(`/v1/batches/${native.id}`, key)).json()) as {
        status: string
        request_counts: { succeeded: number }
      }
      expect(kept).toMatchObject({ status: 'completed', request_counts: { succeeded: 1 } })
      expect(await gw.janitor.runOnce(later)).toMatchObject({ purgedBatches: [], deletedFiles: [] })
    })
  })
}
