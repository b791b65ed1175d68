/** The standard 16 MiB / 50,000-line file is admitted whole, on every store. */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'

const file = join(mkdtempSync(join(tmpdir(), 'mg-big-')), 'big.jsonl')

beforeAll(async () => {
  const generator = Bun.spawn(
    [
      process.execPath,
      'bench/gen-jsonl.ts',
      '--bytes',
      '16777216',
      '--model',
      'sim/chat',
      '--out',
      file,
    ],
    {
      cwd: join(import.meta.dir, '../..'),
      stdout: 'ignore',
    },
  )
  expect(await generator.exited).toBe(0)
})

for (const storeKind of STORES) {
  describe(`a 16 MiB file (${storeKind})`, () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await startTestGateway({ store: storeKind, env: { MULTIGRID_DISPATCH: '0' } })
    })
    afterAll(() => gw.stop())

    test('50,000 lines of exactly 16 MiB are admitted and every line is stored in order', async () => {
      const { key } = await gw.newAccount('1000')
      const bytes = await Bun.file(file).bytes()
      expect(bytes.byteLength).toBe(16 * 1024 * 1024)
      const response = await gw.request('/v1/batches', key, { method: 'POST', body: bytes })
      expect(response.status).toBe(201)
      const batch = (await response.json()) as { id: string; line_count: number }
      expect(batch.line_count).toBe(50_000)
      const input = await (
        await gw.request(`/v1/batches/${batch.id}/results?format=input`, key)
      ).text()
      expect(input).toBe(new TextDecoder().decode(bytes))
    })
  })
}
