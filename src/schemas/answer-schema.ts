/**
 * The JSON Schema of a structured request (`response_format.json_schema.schema`, docs/open-models.md),
 * compiled by Ajv: once at validation, where a schema that does not compile is an issue, and the
 * same compiled function at result time, where it judges the answer. Compiled schemas are kept by
 * their text (a file's lines mostly share one), a bounded number of them per thread.
 *
 * The draft is the one `$schema` names: 2020-12 when absent (what OpenAI's and vLLM's examples
 * use), 2019-09 or draft-07 when named. `format` is an annotation here, not checked: Ajv checks
 * formats only with ajv-formats, which the gateway does not carry, and an answer is not failed
 * for a rule the gateway cannot check the same way every time.
 */
import Ajv, { type ValidateFunction } from 'ajv'
import Ajv2019 from 'ajv/dist/2019'
import Ajv2020 from 'ajv/dist/2020'
import { checkPatterns, compiledInstructions, PatternError, re2Engine } from './re2-patterns.ts'
import { findLoop, findRecursion } from './schema-recursion.ts'

/** A schema as the gateway uses it: how to judge an answer, and whether it recurses. */
export interface AnswerSchema {
  /** Null when `value` is valid; otherwise the first reason it is not, as Ajv words it. */
  check(value: unknown): string | null
  /** Keys from the schema's root to a `$ref` that leads back into itself, or null. */
  readonly recursion: readonly string[] | null
}

/** `pattern`: the schema was refused for a pattern RE2 cannot take (re2-patterns.ts). */
export type CompiledAnswerSchema =
  { ok: true; schema: AnswerSchema } | { ok: false; message: string; pattern?: boolean }

// Unknown keywords pass (strict off), as OpenAI and vLLM accept them; the schema itself is still
// checked against its draft's meta-schema, so a misspelt type does not compile. No console output.
// Patterns run on RE2 (re2-patterns.ts, docs/structured-outputs.md), linear in the answer's length. Ajv's code
// optimizer is off: it grows faster than the schema (1,000 properties took 1.9 s with it, 0.36 s
// without, on a busy 2-core machine), and judging barely notices (bench/schema-check.ts).
const options = {
  strict: false,
  allErrors: false,
  validateFormats: false,
  logger: false,
  code: { regExp: re2Engine, optimize: false },
} as const

type AjvInstance = InstanceType<typeof Ajv>
type Draft = '2020-12' | '2019-09' | 'draft-07'
const instances = new Map<Draft, AjvInstance>()

/** Made on first use: each instance compiles its meta-schema once, which takes a few milliseconds. */
function instanceFor(draft: Draft): AjvInstance {
  let ajv = instances.get(draft)
  if (!ajv) {
    if (draft === '2020-12') ajv = new Ajv2020(options) as AjvInstance
    else if (draft === '2019-09') ajv = new Ajv2019(options) as AjvInstance
    else ajv = new Ajv(options)
    instances.set(draft, ajv)
  }
  return ajv
}

const DRAFTS: [RegExp, Draft][] = [
  [/^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/, '2020-12'],
  [/^https?:\/\/json-schema\.org\/draft\/2019-09\/schema#?$/, '2019-09'],
  [/^https?:\/\/json-schema\.org\/draft-07\/schema#?$/, 'draft-07'],
]

/** Distinct schemas kept compiled per thread; the least recently used is dropped past it. */
const CACHE_SIZE = 256
const cache = new Map<string, CompiledAnswerSchema>()

/** Whether the schema of this JSON text is in this thread's cache. */
export function isCompiled(text: string): boolean {
  return cache.has(text)
}

/**
 * An Ajv instance keeps what every compile made in its own scope (each pattern's RE2 program, the
 * functions of referenced schemas) after the schema is removed, so its memory grows with every
 * distinct schema a tenant sends: 60 schemas of 100 patterns like `a{1,1000}` held 2.5 GB. So the
 * instances are weighed, in estimated bytes, and past this weight they are dropped with the
 * compiled schemas that use them and made afresh (a few milliseconds, on the next compile).
 * Weights, measured after a garbage collection: about 128 bytes per character of a schema's text
 * (Ajv's generated code), and about 256 per RE2 instruction.
 */
export const AJV_WEIGHT_BOUND = 128 * 1024 * 1024
const BYTES_PER_SCHEMA_CHAR = 128
const BYTES_PER_INSTRUCTION = 256
let ajvWeight = 0

/** `text`: the schema's JSON text when the caller has it already (the cache's key). */
export function compileAnswerSchema(
  schema: Record<string, unknown>,
  text: string = JSON.stringify(schema),
): CompiledAnswerSchema {
  const hit = cache.get(text)
  if (hit) {
    // Most recently used last: a Map iterates in insertion order.
    cache.delete(text)
    cache.set(text, hit)
    return hit
  }
  const instructionsBefore = compiledInstructions()
  const compiled = compileUncached(schema)
  ajvWeight +=
    text.length * BYTES_PER_SCHEMA_CHAR +
    (compiledInstructions() - instructionsBefore) * BYTES_PER_INSTRUCTION
  if (ajvWeight > AJV_WEIGHT_BOUND) {
    // Not kept either: its function would keep the old instance, scope and all, while cached.
    instances.clear()
    cache.clear()
    ajvWeight = 0
    return compiled
  }
  if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!)
  cache.set(text, compiled)
  return compiled
}

function compileUncached(schema: Record<string, unknown>): CompiledAnswerSchema {
  const named = schema.$schema
  let draft: Draft = '2020-12'
  if (named !== undefined) {
    const found = typeof named === 'string' ? DRAFTS.find(([pattern]) => pattern.test(named)) : null
    if (!found) {
      return {
        ok: false,
        message: `$schema ${JSON.stringify(named).slice(0, 80)} is not a draft the gateway can check (2020-12, 2019-09 or draft-07)`,
      }
    }
    draft = found[1]
  }
  // Ajv registers a schema's ids while it compiles it (a reference to "#" needs them); they are
  // dropped at once, so that no other account's schema can reach this one by an id, and two
  // schemas may use one id for different things.
  const ajv = instanceFor(draft)
  const known = new Set(Object.keys(ajv.refs))
  // An id Ajv holds already can only be a meta-schema's: removing it below would break every
  // later schema, so the schema is refused (Ajv would refuse to compile it anyway).
  const id = typeof schema.$id === 'string' ? schema.$id.replace(/#$/, '') : null
  if (id !== null && (known.has(id) || id in ajv.schemas)) {
    return {
      ok: false,
      message: `$id ${JSON.stringify(id).slice(0, 80)} is a meta-schema's; give the schema an id of its own or none`,
    }
  }
  // Before Ajv, whose compile of such a loop runs until the stack overflows.
  const loop = findLoop(schema)
  if (loop) {
    return {
      ok: false,
      message: `${loop.join('.')} leads back to a schema it is in without going into a property or an item, so checking an answer against it would never end`,
    }
  }
  try {
    checkPatterns(schema)
    return answerSchema(ajv, ajv.compile(schema), schema)
  } catch (error) {
    if (error instanceof PatternError) return { ok: false, message: error.message, pattern: true }
    return { ok: false, message: (error as Error).message.slice(0, 300) }
  } finally {
    for (const id of Object.keys(ajv.refs)) if (!known.has(id)) delete ajv.refs[id]
    // Also lets go of Ajv's own cache entry, kept by the schema object.
    ajv.removeSchema(schema)
  }
}

function answerSchema(
  ajv: AjvInstance,
  validate: ValidateFunction,
  schema: Record<string, unknown>,
): CompiledAnswerSchema {
  const recursion = findRecursion(schema)
  return {
    ok: true,
    schema: {
      recursion,
      check(value) {
        if (validate(value)) return null
        return ajv.errorsText(validate.errors, { dataVar: 'answer' }).slice(0, 300)
      },
    },
  }
}
