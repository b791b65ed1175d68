/**
 * Named steps instead of long closures (issue 24 item 4): no function in src/ or providers/ runs
 * over 150 lines or takes more than four positional parameters; a factory with more inputs takes
 * `(deps, options)`. Measured from the TypeScript AST (function-size.ts), nested functions each on
 * their own.
 *
 * LEFT holds the functions still over a bound (none now; the list stays so a known offender can be
 * named while it is taken apart), each with its figures as they stand: one may
 * shrink, never grow, and a new function over a bound fails at once. One that comes within both
 * bounds must leave the list, so the list only gets shorter.
 */
import { describe, expect, test } from 'bun:test'
import { join } from 'node:path'
import { measureFunctions, measureTree, type FunctionSize } from './function-size.ts'

const MAX_LINES = 150
const MAX_PARAMETERS = 4

/** `file name` → the figures it may not pass while it is being taken apart. */
const LEFT = new Map<string, { lines: number; parameters: number }>([])

const ROOT = join(import.meta.dir, '../..')
const keyOf = (size: FunctionSize) => `${size.file} ${size.name}`
const over = (size: { lines: number; parameters: number }) =>
  size.lines > MAX_LINES || size.parameters > MAX_PARAMETERS

describe('function sizes', () => {
  const sizes = measureTree(ROOT, ['src', 'providers'])

  test('the measure counts lines first to last and parameters by position, nested ones apart', () => {
    const text = [
      'function outer(this: unknown, a: number, { b, c }: { b: 1; c: 2 }) {',
      '  const inner = (x: number) => x',
      '  return inner',
      '}',
    ].join('\n')
    expect(measureFunctions('x.ts', text)).toEqual([
      { file: 'x.ts', name: 'outer', line: 1, lines: 4, parameters: 2 },
      { file: 'x.ts', name: 'outer/inner', line: 2, lines: 1, parameters: 1 },
    ])
    expect(sizes.length).toBeGreaterThan(1000)
  })

  test(`no function over ${MAX_LINES} lines or ${MAX_PARAMETERS} positional parameters, but those LEFT, none grown`, () => {
    const problems: string[] = []
    for (const size of sizes) {
      const left = LEFT.get(keyOf(size))
      const bound = left ?? { lines: MAX_LINES, parameters: MAX_PARAMETERS }
      if (
        size.lines > Math.max(bound.lines, MAX_LINES) ||
        size.parameters > Math.max(bound.parameters, MAX_PARAMETERS)
      )
        problems.push(
          `${size.file}:${size.line} ${size.name}: ${size.lines} lines, ${size.parameters} parameters`,
        )
    }
    expect(problems).toEqual([])
  })

  test('every function LEFT is still over a bound (one that came within both leaves the list)', () => {
    const measured = new Map<string, { lines: number; parameters: number }>()
    for (const size of sizes) {
      const seen = measured.get(keyOf(size))
      measured.set(keyOf(size), {
        lines: Math.max(seen?.lines ?? 0, size.lines),
        parameters: Math.max(seen?.parameters ?? 0, size.parameters),
      })
    }
    const done = [...LEFT.keys()].filter((key) => {
      const size = measured.get(key)
      return size === undefined || !over(size)
    })
    expect(done).toEqual([])
  })
})
