/**
 * The garbage hook of the bulk loops (`collectGarbage`): the file validator's line loop and
 * PostgreSQL's COPY of a batch's lines call it every so often when it is given, and the gateway
 * gives src/memory/young-garbage.ts (gateway.ts); without it they call nothing.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import { createCatalog } from '../../src/catalog/catalog.ts'
import { loadConfig } from '../../src/config.ts'
import { createFileValidator } from '../../src/ingest/parallel-validation.ts'
import { validateBatchFile } from '../../src/ingest/validate-batch-file.ts'
import { createPostgresStore } from '../../src/store/postgres/postgres-store.ts'
import { testCatalog, writeCatalog } from '../helpers/catalog.ts'
import { chatLine, dropTestSchema, freshSchemaUrl, TEST_DATABASE_URL } from '../helpers/gateway.ts'
import { newBatch } from '../store/batch-fixtures.ts'

const config = loadConfig({
  MULTIGRID_CONFIG: writeCatalog(testCatalog({ openai: 'http://127.0.0.1:9/v1' })),
})
const catalog = createCatalog(config.catalog, config.providerKeys)
const LIMITS = { maxLines: 50_000, maxCustomIdLength: 64 }
const file = (lines: number) =>
  new TextEncoder().encode(
    Array.from({ length: lines }, (_, i) => JSON.stringify(chatLine(`r${i}`))).join('\n') + '\n',
  )

describe('the garbage hook', () => {
  test('validating a file calls it every 2,048 lines', () => {
    let calls = 0
    const verdict = validateBatchFile(file(5000), catalog, LIMITS, {
      collectGarbage: () => calls++,
    })
    expect(verdict.ok).toBe(true)
    expect(calls).toBe(2)
  })

  test('the validator passes its hook to the line loop in one pass; a split file is checked on the threads, which collect their own', async () => {
    let onePass = 0
    const single = createFileValidator(catalog, config, {
      parallel: false,
      collectGarbage: () => onePass++,
    })
    expect((await single.validate(file(4100), LIMITS)).ok).toBe(true)
    expect(onePass).toBe(2)
    await single.close()

    let split = 0
    const paths: string[] = []
    const parallel = createFileValidator(catalog, config, {
      parallel: true,
      minParallelBytes: 0,
      collectGarbage: () => split++,
      observe: (how) => paths.push(how),
    })
    try {
      expect((await parallel.validate(file(8200), LIMITS)).ok).toBe(true)
      expect(paths).toEqual(['split'])
      // Both halves are checked on the threads (validation-worker.ts collects there): no line on the event loop.
      expect(split).toBe(0)
      // A file clean in each half but not as a whole (a custom_id in both) is listed again in one
      // pass, on a thread too: an invalid file costs its sender nothing, nor the event loop.
      const text = new TextDecoder().decode(file(8200))
      const twice = new TextEncoder().encode(text + JSON.stringify(chatLine('r0')) + '\n')
      const verdict = await parallel.validate(twice, LIMITS)
      expect(paths).toEqual(['split', 'split_then_one_pass'])
      expect(verdict.ok).toBe(false)
      if (!verdict.ok) expect(verdict.issues[0]).toMatchObject({ line: 8201, custom_id: 'r0' })
      expect(split).toBe(0)
    } finally {
      await parallel.close()
    }
  })

  describe.if(TEST_DATABASE_URL !== null)('on postgres', () => {
    const { url } = freshSchemaUrl(TEST_DATABASE_URL ?? 'postgres://127.0.0.1/none')
    afterAll(() => dropTestSchema(url))

    test("a batch's COPY calls it every 4 MiB of line data", async () => {
      const base = new URL(url)
      const schema = base.searchParams.get('search_path')!
      base.searchParams.delete('search_path')
      let calls = 0
      const { store } = await createPostgresStore(base.toString(), {
        schema,
        max: 2,
        collectGarbage: () => calls++,
      })
      try {
        await store.createAccount({
          id: 'acct_gc',
          name: 'gc',
          creditUsd: '100',
          maxOpenBatches: 10,
          rateLimitPerMinute: 600,
          createdAt: 1,
        })
        // 6,000 lines of about 1.5 KiB: 9 MiB of COPY data, two calls.
        const lines = Array.from({ length: 6000 }, (_, i) => ({
          lineNo: i + 1,
          customId: `c-${i + 1}`,
          input: JSON.stringify({ prompt: 'x'.repeat(1500) }),
        }))
        const created = await store.admitBatch(
          newBatch('acct_gc', 'batch_gc', lines.length, { lines }),
        )
        expect(created.kind).toBe('created')
        expect(calls).toBe(2)
      } finally {
        await store.close()
      }
    })
  })
})
