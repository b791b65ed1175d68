/**
 * Fine-tunes in a file validated on two cores (src/ingest/parallel-validation.ts): the account's
 * fine-tunes reach the validation thread, a clean file is put together from the halves, and the
 * base's limits hold for the two halves together, with the verdict of one pass in every case; and a
 * fine-tune line whose provider object leaves out the pools is told what to change in it.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import type { FineTuneRecord } from '../../src/catalog/fine-tunes.ts'
import { validateBatchFile } from '../../src/ingest/validate-batch-file.ts'
import { chatLine, jsonl } from '../helpers/gateway.ts'
import { LORA_BASE, loraCatalog } from '../helpers/lora-catalog.ts'
import { splitValidator } from '../helpers/split-validator.ts'

const { catalog, validator, paths } = splitValidator(loraCatalog('http://127.0.0.1:9/v1'))
afterAll(() => validator.close())
const LIMITS = { maxLines: 1000, maxCustomIdLength: 64 }

const fineTune = (n: number): FineTuneRecord => ({
  id: `ft:lora-base:abc:a${n}`,
  accountId: 'acct_1',
  baseModel: LORA_BASE,
  name: `a${n}`,
  rank: 32,
  sizeMib: 100,
  source: `/srv/a${n}`,
  status: 'active',
  createdAt: 0,
  deactivatedAt: null,
})
const lookup = new Map(Array.from({ length: 12 }, (_, n) => [fineTune(n).id, fineTune(n)]))
/** A line of the base, then two lines for each of these fine-tunes. */
const file = (ids: number[]) =>
  new TextEncoder().encode(
    jsonl([
      chatLine('base', 'x', {}, LORA_BASE),
      ...ids.flatMap((n) => [0, 1].map((k) => chatLine(`l${n}-${k}`, 'x', {}, fineTune(n).id))),
    ]),
  )

async function bothWays(bytes: Uint8Array) {
  paths.length = 0
  const split = await validator.validate(bytes, LIMITS, lookup)
  const onePass = validateBatchFile(bytes, catalog, LIMITS, { fineTunes: lookup })
  return { split, onePass, path: paths[0] }
}

describe('fine-tunes in a file validated on two cores', () => {
  test("the account's fine-tunes reach the validation thread: a clean file is put together from the halves", async () => {
    const { split, onePass, path } = await bothWays(file([0, 1, 2, 3, 4, 5, 6, 7]))
    expect(path).toBe('split')
    expect(split.ok).toBe(true)
    expect(split.ok && split.lines.length).toBe(17)
    expect(split.ok && onePass.ok && split.ceiling.toFixed()).toBe(
      onePass.ok && onePass.ceiling.toFixed(),
    )
  })

  test('halves each within max_per_batch but over it together: refused, as one pass refuses it', async () => {
    const { split, onePass, path } = await bothWays(file([0, 1, 2, 3, 4, 5, 6, 7, 8]))
    expect(path).toBe('split_then_one_pass')
    expect(split).toEqual(onePass)
    expect(!split.ok && split.issues).toEqual([
      expect.objectContaining({ message: expect.stringContaining('max_per_batch') }),
    ])
    expect(!split.ok && split.issues[0]!.code).toBeUndefined()
  })

  test("an id that is not the account's, in the thread's half: the issue of one pass", async () => {
    const bytes = new TextEncoder().encode(
      jsonl([
        ...Array.from({ length: 10 }, (_, i) => chatLine(`b${i}`, 'x', {}, LORA_BASE)),
        chatLine('foreign', 'x', {}, 'ft:lora-base:zzz:theirs'),
      ]),
    )
    const { split, onePass, path } = await bothWays(bytes)
    expect(path).toBe('split_then_one_pass')
    expect(split).toEqual(onePass)
    expect(!split.ok && split.issues.map((i) => [i.line, i.code])).toEqual([
      [11, 'model_not_found'],
    ])
  })
})

describe('a fine-tune line whose own routing leaves out the pools that serve fine-tunes', () => {
  const line = (provider: Record<string, unknown>) => {
    const ft = chatLine('ft', 'x', {}, fineTune(0).id)
    return new TextEncoder().encode(jsonl([{ ...ft, body: { ...ft.body, provider } }]))
  }
  const issues = (bytes: Uint8Array) => {
    const verdict = validateBatchFile(bytes, catalog, LIMITS, { fineTunes: lookup })
    return verdict.ok
      ? []
      : verdict.issues.map(({ path, message, fix }) => ({ path, message, fix }))
  }

  test('is told to change its provider object, as a base line would be, not to ask the operator', () => {
    expect(issues(line({ ignore: ['pool'] }))).toEqual([
      {
        path: 'body.provider',
        message: `leaves out every provider that serves fine-tunes of ${LORA_BASE}`,
        fix: 'allow one of: pool',
      },
    ])
  })

  test("a price cap below the pool's prices names them", () => {
    const [issue] = issues(line({ max_price: { prompt: '0.1' } }))
    expect(issue!.path).toBe('body.provider.max_price')
    expect(issue!.fix).toContain('{"prompt": "0.20", "completion": "0.60"}')
  })
})
