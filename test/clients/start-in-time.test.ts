/**
 * Starting in time (docs/open-models.md): a batch none of whose lines has started by half its window (by
 * 48 hours for a window of 72 hours or more) ends `failed` with capacity_unavailable, nothing
 * run, its hold released, nothing charged; the facade shows the same errors entry. With no
 * dispatcher (MULTIGRID_DISPATCH=0) no line ever starts, and the batches are aged in the store.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'
import { openStoreFile } from '../helpers/store-file.ts'
import { waitFor } from '../helpers/wait.ts'

/** Moves a batch's creation and deadline `seconds` into the past, in the gateway's own store. */
async function age(gw: TestGateway, batchId: string, seconds: number) {
  if (gw.env.DATABASE_URL) {
    const { default: postgres } = await import('postgres')
    const sql = postgres(gw.env.DATABASE_URL, { max: 1, onnotice: () => {} })
    try {
      await sql`UPDATE batches SET created_at = created_at - ${seconds},
        deadline_at = deadline_at - ${seconds} WHERE id = ${batchId}`
    } finally {
      await sql.end()
    }
    return
  }
  const db = openStoreFile(gw.env.MULTIGRID_DATA_DIR)
  try {
    db.query(
      'UPDATE batches SET created_at = created_at - ?, deadline_at = deadline_at - ? WHERE id = ?',
    ).run(seconds, seconds, batchId)
  } finally {
    db.close()
  }
}

const HOUR = 3600

for (const store of STORES) {
  describe(store, () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await startTestGateway({
        store,
        env: { MULTIGRID_DISPATCH: '0', MULTIGRID_CREDIT_WAIT_POLL_MS: '100' },
      })
    })
    afterAll(() => gw.stop())

    async function submit(key: string, hours: number) {
      const response = await gw.request(`/v1/batches?completion_window_hours=${hours}`, key, {
        method: 'POST',
        headers: { 'content-type': 'application/jsonl' },
        body: jsonl([chatLine('a'), chatLine('b')]),
      })
      expect(response.status).toBe(201)
      return ((await response.json()) as { id: string }).id
    }
    const read = async (key: string, id: string) =>
      (await (await gw.request(`/v1/batches/${id}`, key)).json()) as {
        status: string
        cost_usd: string
        request_counts: { failed: number }
      }
    const account = async (id: string) =>
      (await (await gw.admin(`/accounts/${id}`)).json()) as {
        balance_usd: string
        held_usd: string
      }

    test('unstarted by half its window: failed capacity_unavailable, nothing held or charged', async () => {
      const { key, accountId } = await gw.newAccount('5')
      const id = await submit(key, 24)
      expect(Number((await account(accountId)).held_usd)).toBeGreaterThan(0)
      await age(gw, id, 12 * HOUR + 5)
      const failed = await waitFor('the batch to fail', async () => {
        const batch = await read(key, id)
        return batch.status === 'failed' ? batch : null
      })
      expect(failed.request_counts.failed).toBe(2)
      expect(failed.cost_usd).toBe('0.000000')
      const after = await account(accountId)
      expect(Number(after.held_usd)).toBe(0)
      expect(Number(after.balance_usd)).toBe(5)
      const results = (await (await gw.request(`/v1/batches/${id}/results`, key)).text())
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { status: string; error: { code: string } })
      expect(results.map((r) => [r.status, r.error.code])).toEqual([
        ['failed', 'capacity_unavailable'],
        ['failed', 'capacity_unavailable'],
      ])
      const facade = (await (await gw.request(`/openai/v1/batches/${id}`, key)).json()) as {
        status: string
        errors: { data: { code: string }[] }
      }
      expect(facade.status).toBe('failed')
      expect(facade.errors.data[0].code).toBe('capacity_unavailable')
    })

    test('a 72-hour window has 48 hours to start, not 36', async () => {
      const { key } = await gw.newAccount('5')
      const early = await submit(key, 72)
      const late = await submit(key, 72)
      await age(gw, early, 40 * HOUR)
      await age(gw, late, 48 * HOUR + 5)
      await waitFor('the late one to fail', async () => (await read(key, late)).status === 'failed')
      expect((await read(key, early)).status).toBe('in_progress')
    })
  })
}
