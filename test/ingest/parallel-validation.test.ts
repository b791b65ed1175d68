/**
 * The two-core validator (src/ingest/parallel-validation.ts) must give exactly the verdict of one
 * pass (validateBatchFile) on every file: the same lines and ceiling when it is clean, the same
 * issues, in the same order, with the same count, when it is not. Every file here is split, so
 * each property exercises the halves and what crosses between them.
 */
import { afterAll, describe, expect, test } from 'bun:test'
import fc from 'fast-check'
import { createFileValidator, type ValidationPath } from '../../src/ingest/parallel-validation.ts'
import { validateBatchFile, type FileVerdict } from '../../src/ingest/validate-batch-file.ts'
import { chatLine, embedLine } from '../helpers/gateway.ts'
import { splitValidator } from '../helpers/split-validator.ts'

const { config, catalog, validator, paths, reasons } = splitValidator()
const LIMITS = { maxLines: 40, maxCustomIdLength: 64 }
const encode = (text: string) => new TextEncoder().encode(text)

afterAll(() => validator.close())

/** A verdict as plain data, so two can be compared whole. */
function plain(verdict: FileVerdict) {
  if (!verdict.ok) return verdict
  return {
    ok: true as const,
    endpoint: verdict.endpoint,
    ceiling: verdict.ceiling.toFixed(),
    lines: verdict.lines.map((line) => ({
      lineNo: line.lineNo,
      customId: line.customId,
      input: line.input,
    })),
  }
}

/** Both verdicts, and how the two-core validator came to its own. */
async function bothWays(bytes: Uint8Array) {
  paths.length = 0
  reasons.length = 0
  const split = plain(await validator.validate(bytes, LIMITS))
  const onePass = plain(validateBatchFile(bytes, catalog, LIMITS))
  return { split, onePass, path: paths[0], why: reasons[0] }
}

/** Lines that are fine alone but may clash across the file: shared custom_ids, the other endpoint. */
const line = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.nat({ max: 30 }).map((n) => JSON.stringify(chatLine(`id-${n}`, `prompt ${n}`))),
  },
  {
    weight: 1,
    arbitrary: fc.nat({ max: 30 }).map((n) => JSON.stringify(embedLine(`id-${n}`, `text ${n}`))),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      '',
      ' ',
      '\r',
      '\ufeff' + JSON.stringify(chatLine('bom', 'x')),
      '{"custom_id":',
      'not json',
    ),
  },
)
const file = fc
  .record({
    lines: fc.array(line, { minLength: 0, maxLength: 50 }),
    crlf: fc.boolean(),
    bom: fc.boolean(),
    end: fc.boolean(),
  })
  .map(
    ({ lines, crlf, bom, end }) =>
      (bom ? '\ufeff' : '') + lines.join(crlf ? '\r\n' : '\n') + (end ? '\n' : ''),
  )

describe('validating a file on two cores', () => {
  test('gives the one-pass verdict on every file: lines and ceiling, or issues, order and count', async () => {
    let clean = 0
    await fc.assert(
      fc.asyncProperty(file, async (text) => {
        const { split, onePass, path, why } = await bothWays(encode(text))
        expect(split).toEqual(onePass)
        // A clean file is never validated twice for its content: put together from its halves,
        // or whole on a thread when its middle falls in its last line. (A thread that failed leaves
        // it to one pass too, and says why; clean counts only files put together.)
        if (onePass.ok) {
          expect(path).not.toBe('split_then_one_pass')
          if (path === 'thread_failed') console.warn(`the validation thread failed: ${why}`)
          if (path === 'split') clean++
        }
      }),
      { numRuns: 400, interruptAfterTimeLimit: 8_000 },
    )
    // The property held for files put together from halves, not only for refused ones.
    expect(clean).toBeGreaterThan(10)
  })

  test('a clean file is put together from both halves, in order, with the ceiling of one pass', async () => {
    const lines = Array.from({ length: 30 }, (_, i) =>
      JSON.stringify(chatLine(`line-${i}`, `prompt number ${i} ${'é'.repeat(i)}`)),
    )
    const { split, onePass, path } = await bothWays(encode(lines.join('\n') + '\n'))
    expect(path).toBe('split')
    expect(split).toEqual(onePass)
    expect(split.ok).toBe(true)
    if (!split.ok) return
    expect(split.lines.map((l) => l.lineNo)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1))
    expect(split.lines[29].input).toBe(lines[29])
  })

  test('a body in shared memory is split where it is, with the verdict of one pass', async () => {
    const lines = Array.from({ length: 30 }, (_, i) =>
      JSON.stringify(chatLine(`shared-${i}`, `prompt ${'ü'.repeat(i)}`)),
    )
    const plainBytes = encode(lines.join('\n') + '\n')
    const shared = new Uint8Array(new SharedArrayBuffer(plainBytes.byteLength))
    shared.set(plainBytes)
    const { split, onePass, path } = await bothWays(shared)
    expect(path).toBe('split')
    expect(split).toEqual(onePass)
    expect(split).toEqual(plain(validateBatchFile(plainBytes, catalog, LIMITS)))
    // The thread only read it: the body is as it was sent.
    expect(Buffer.from(shared).equals(Buffer.from(plainBytes))).toBe(true)
  })

  test('a custom_id used in both halves is refused, named on its later line', async () => {
    const lines = Array.from({ length: 20 }, (_, i) =>
      JSON.stringify(chatLine(i === 17 ? 'line-2' : `line-${i}`)),
    )
    const { split, onePass, path } = await bothWays(encode(lines.join('\n')))
    // Each half is clean on its own: the clash is found between them.
    expect(path).toBe('split_then_one_pass')
    expect(split).toEqual(onePass)
    expect(split.ok).toBe(false)
    if (split.ok) return
    expect(split.issues).toEqual([
      expect.objectContaining({
        line: 18,
        path: 'custom_id',
        message: '"line-2" is already used on line 3',
      }),
    ])
  })

  test('an endpoint that changes in the second half is refused as in one pass', async () => {
    const lines = Array.from({ length: 20 }, (_, i) =>
      JSON.stringify(i < 15 ? chatLine(`c-${i}`) : embedLine(`e-${i}`)),
    )
    const { split, onePass, path } = await bothWays(encode(lines.join('\n')))
    expect(path).toBe('split_then_one_pass')
    expect(split).toEqual(onePass)
    expect(split.ok).toBe(false)
    if (split.ok) return
    expect(split.issues.map((issue) => [issue.line, issue.path])).toEqual(
      [16, 17, 18, 19, 20].map((line) => [line, 'url']),
    )
  })

  test('a file that is one JSON array (jq -s .) is that one issue, split or not, and nothing more', async () => {
    const requests = Array.from({ length: 20 }, (_, i) => chatLine(`a-${i}`))
    for (const text of [JSON.stringify(requests, null, 2), JSON.stringify(requests)]) {
      const { split, onePass } = await bothWays(encode(text + '\n'))
      expect(split).toEqual(onePass)
      expect(split.ok).toBe(false)
      if (split.ok) return
      expect(split.issues).toHaveLength(1)
      expect(split.omitted).toBe(0)
      expect(split.issues[0]).toMatchObject({ line: 1, path: '' })
      expect(split.issues[0]!.fix).toContain("jq -c '.[]' requests.json > requests.jsonl")
    }
  })

  test('the line limit counts both halves', async () => {
    const lines = Array.from({ length: LIMITS.maxLines + 1 }, (_, i) =>
      JSON.stringify(chatLine(`l-${i}`)),
    )
    const { split, onePass, path } = await bothWays(encode(lines.join('\n')))
    expect(path).toBe('split_then_one_pass')
    expect(split).toEqual(onePass)
    expect(split.ok).toBe(false)
    if (split.ok) return
    expect(split.issues[0].message).toBe(`the file has more than ${LIMITS.maxLines} requests`)
  })

  test('a file with no line break past its middle is checked whole on a thread, never in one pass on the event loop, with the verdict of one pass', async () => {
    const giant = JSON.stringify(chatLine('giant', 'é'.repeat(20_000)))
    const cases: { text: string; path: ValidationPath }[] = [
      { text: giant, path: 'whole' },
      { text: `${JSON.stringify(chatLine('short'))}\n${giant}\n`, path: 'whole' },
      { text: `${giant}\n${giant}`, path: 'split_then_one_pass' },
      { text: giant.slice(0, -1), path: 'whole_then_issues' },
    ]
    for (const { text, path: expected } of cases) {
      const { split, onePass, path } = await bothWays(encode(text))
      expect(path).toBe(expected)
      expect(split).toEqual(onePass)
    }
  })

  test('a validation thread that stops mid-file leaves the verdict to one pass, and closing stops splitting', async () => {
    const own: string[] = []
    const closing = createFileValidator(catalog, config, {
      minParallelBytes: 0,
      parallel: true,
      observe: (how, why) => own.push(why ? `${how}: ${why}` : how),
    })
    const lines = Array.from({ length: 30 }, (_, i) => JSON.stringify(chatLine(`stop-${i}`)))
    const bytes = encode(lines.join('\n'))
    const pending = closing.validate(bytes, LIMITS)
    await closing.close()
    expect(plain(await pending)).toEqual(plain(validateBatchFile(bytes, catalog, LIMITS)))
    expect(plain(await closing.validate(bytes, LIMITS))).toEqual(
      plain(validateBatchFile(bytes, catalog, LIMITS)),
    )
    expect(own).toEqual(['thread_failed: the validation thread was stopped', 'one_pass'])
  })
})
