/**
 * `pattern` and `patternProperties` of a tenant's schema run on RE2JS (docs/structured-outputs.md): linear in the
 * answer's length whatever the pattern, where JavaScript's backtracking engine takes exponential
 * time on `^(a+)+$` against "aaaa…!". Ajv takes the engine as its `code.regExp` option (as its
 * documentation shows for the `re2` package); the object it gets back needs only `test`.
 *
 * RE2 has no backreferences and no lookaround: such a pattern does not compile, and the schema is
 * refused at validation with the pattern named (PatternError).
 */
import type { RegExpEngine } from 'ajv/dist/types'
import { RE2JS } from 're2js'
import { DATA_KEYWORDS, MAP_KEYWORDS } from './schema-keywords.ts'

/** A pattern RE2 cannot take; `pattern` is the schema's own text of it. */
export class PatternError extends Error {
  constructor(
    readonly pattern: string,
    reason: string,
  ) {
    super(
      `pattern ${JSON.stringify(pattern.length > 80 ? pattern.slice(0, 80) + '…' : pattern)} is not RE2 syntax (${reason.slice(0, 120)}); use RE2 syntax: no backreferences (\\1) and no lookahead or lookbehind ((?=…), (?!…), (?<=…), (?<!…))`,
    )
  }
}

/** RE2 instructions compiled on this thread so far (answer-schema.ts weighs its Ajv by them). */
let instructions = 0

/** The RE2 instructions this thread has compiled: each pattern's program, as RE2 sizes it. */
export function compiledInstructions(): number {
  return instructions
}

function re2(pattern: string): { test(s: string): boolean; toString(): string } {
  let compiled: RE2JS
  try {
    compiled = RE2JS.compile(pattern)
  } catch (error) {
    throw new PatternError(pattern, (error as Error).message)
  }
  instructions += compiled.programSize()
  return {
    test: (s) => compiled.test(s),
    // Ajv keys the patterns of its generated code by this text: one per pattern.
    toString: () => `re2:${pattern}`,
  }
}

/**
 * Compiles every `pattern` and `patternProperties` key of the schema, reached or not, and throws
 * PatternError at the first RE2 cannot take: Ajv compiles only the subschemas something refers
 * to, so one under an unused `$defs` entry would pass unseen.
 */
export function checkPatterns(schema: unknown): void {
  const stack: unknown[] = [schema]
  while (stack.length > 0) {
    const node = stack.pop()
    if (typeof node !== 'object' || node === null) continue
    if (Array.isArray(node)) {
      for (const item of node) stack.push(item)
      continue
    }
    for (const [key, value] of Object.entries(node as Record<string, unknown>)) {
      if (DATA_KEYWORDS.has(key) || typeof value !== 'object' || value === null) {
        if (key === 'pattern' && typeof value === 'string') re2(value)
        continue
      }
      if (key === 'patternProperties') for (const name of Object.keys(value)) re2(name)
      // A map's values are schemas; its names are not keywords, so they are not looked at.
      if (MAP_KEYWORDS.has(key) && !Array.isArray(value)) stack.push(...Object.values(value))
      else stack.push(value)
    }
  }
}

/** The engine for Ajv's `code.regExp`; `code` names it only for standalone code, never made here. */
export const re2Engine: RegExpEngine = Object.assign((pattern: string) => re2(pattern), {
  code: 're2js',
})
