/**
 * Text PostgreSQL cannot store (U+0000, unpaired surrogates such as "\ud800", which is valid JSON)
 * is refused where a user sent it as an identifier, and made storable where it is only quoted.
 */
import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { chatLine, jsonl, startTestGateway, STORES, type TestGateway } from '../helpers/gateway.ts'

for (const storeKind of STORES) {
  describe(`unstorable text (${storeKind})`, () => {
    let gw: TestGateway
    beforeAll(async () => {
      gw = await startTestGateway({ store: storeKind, env: { MULTIGRID_DISPATCH: '0' } })
    })
    afterAll(() => gw.stop())

    test('a custom_id with an unpaired surrogate is an issue on its line; an emoji is fine', async () => {
      const { key } = await gw.newAccount('1')
      // Written by hand: JSON.stringify would also escape the surrogate, but keep the intent visible.
      const body = `${JSON.stringify(chatLine('ok-😀'))}\n{"custom_id":"bad-\\ud800","method":"POST","url":"/v1/chat/completions","body":{"model":"sim/chat","messages":[{"role":"user","content":"x"}]}}\n`
      const response = await gw.request('/v1/batches', key, { method: 'POST', body })
      expect(response.status).toBe(400)
      const json = (await response.json()) as { issues: { line: number; path: string }[] }
      expect(json.issues).toEqual([expect.objectContaining({ line: 2, path: 'custom_id' })])
      expect(
        (await gw.request('/v1/batches', key, { method: 'POST', body: jsonl([chatLine('ok-😀')]) }))
          .status,
      ).toBe(201)
    })

    test('facade metadata with an unpaired surrogate is a 400; a quoted bad model name is stored', async () => {
      const { key } = await gw.newAccount('1')
      const form = new FormData()
      form.set('purpose', 'batch')
      form.set(
        'file',
        new Blob([
          `{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":{"model":"no-such-\\ud800","messages":[{"role":"user","content":"x"}]}}\n`,
        ]),
        'in.jsonl',
      )
      const file = (await (
        await gw.request('/openai/v1/files', key, { method: 'POST', body: form })
      ).json()) as { id: string }
      const create = (metadata: string) =>
        gw.request('/openai/v1/batches', key, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: `{"input_file_id":"${file.id}","endpoint":"/v1/chat/completions","completion_window":"24h","metadata":${metadata}}`,
        })
      const bad = await create('{"team":"\\ud800"}')
      expect(bad.status).toBe(400)
      expect(((await bad.json()) as { error: { param: string } }).error.param).toBe('metadata.team')
      // The file's model name carries the surrogate into the batch's error message: stored, not a 500.
      const rejected = await create('{"team":"ok"}')
      expect(rejected.status).toBe(200)
      const batch = (await rejected.json()) as {
        status: string
        errors: { data: { line: number; param: string }[] }
      }
      expect(batch.status).toBe('failed')
      expect(batch.errors.data[0]).toMatchObject({ line: 1, param: 'body.model' })
    })
  })
}
