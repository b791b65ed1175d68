/**
 * What the adaptive-concurrency tests share: a catalog whose provider `sim` is a pool of simulator
 * replicas, adaptive or not, and a batch of chat lines submitted to a gateway and waited for.
 */
import type { Simulator } from '../../src/simulator/server.ts'
import { testCatalog } from '../helpers/catalog.ts'
import { chatLine, jsonl, type TestGateway } from '../helpers/gateway.ts'
import { FINAL_BATCH, waitFor } from '../helpers/wait.ts'

export type Batch = {
  id: string
  status: string
  request_counts: Record<string, number>
  routing: { providers: Record<string, { succeeded: number; running: number }> }
}

/** The test catalog with provider `sim` on these replicas, `adaptive_concurrency` as given. */
export function poolCatalog(replicas: Simulator[], adaptive: boolean, maxConcurrency = 64) {
  const catalog = testCatalog({ openai: replicas.map((r) => `${r.url}/v1`) }, { maxConcurrency })
  return {
    ...catalog,
    providers: {
      ...catalog.providers,
      sim: { ...catalog.providers.sim, adaptive_concurrency: adaptive },
    },
  }
}

/** Submits a batch of `lines` chat lines on a new account; `finished` waits for its end. */
export async function submitBatch(gw: TestGateway, lines: number) {
  const { key } = await gw.newAccount('10')
  const body = jsonl(Array.from({ length: lines }, (_, i) => chatLine(`l-${i}`, `line ${i}`)))
  const started = performance.now()
  const response = await gw.request('/v1/batches', key, { method: 'POST', body })
  const { id } = (await response.json()) as Batch
  return {
    id,
    key,
    cancel: () => gw.request(`/v1/batches/${id}`, key, { method: 'DELETE' }),
    async finished(timeoutMs = 20_000) {
      const batch = await waitFor(
        'the batch to finish',
        async () => {
          const read = (await (await gw.request(`/v1/batches/${id}`, key)).json()) as Batch
          return FINAL_BATCH.includes(read.status) ? read : null
        },
        timeoutMs,
        20,
      )
      return { batch, seconds: (performance.now() - started) / 1000 }
    },
  }
}
