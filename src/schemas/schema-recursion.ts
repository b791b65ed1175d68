/**
 * Whether a JSON Schema allows unbounded recursion: a `$ref` (or `$recursiveRef`, `$dynamicRef`)
 * that leads, directly or through other references, back to a schema it sits in — a linked
 * list's `next`, a tree's `children`. Such a schema is valid, but a model can keep nesting until
 * `max_tokens` (the GPU-batch seed's advice), so the dry run warns about it.
 *
 * References are followed inside the schema only: `#`, JSON pointers (`#/$defs/node`), anchors
 * (`#node`) and ids of subschemas. An external reference is no cycle of this schema's.
 */
import { DATA_KEYWORDS, MAP_KEYWORDS } from './schema-keywords.ts'

type Node = Record<string, unknown>

/** Keywords that hold schemas reached only by reference, not by the instance's shape. */
const DEFINITION_KEYWORDS = new Set(['$defs', 'definitions'])
const REFERENCE_KEYWORDS = ['$ref', '$recursiveRef', '$dynamicRef'] as const

interface Located {
  node: Node
  /** Keys from the root. */
  path: string[]
  /** The JSON pointer of `node` ("" is the root). */
  pointer: string
}

/** The keys from the root to the first reference found that closes a cycle, or null. */
export function findRecursion(root: unknown): string[] | null {
  return findCycle(root, () => true)
}

/**
 * Keywords whose schemas apply to the instance the schema itself applies to (not to a property
 * or an item of it).
 */
const IN_PLACE = new Set([
  'allOf',
  'anyOf',
  'oneOf',
  'not',
  'if',
  'then',
  'else',
  'dependentSchemas',
  'dependencies',
])

/**
 * A cycle that never goes into a property or an item (`{"$defs": {"a": {"anyOf": [{"$ref":
 * "#/$defs/a"}]}}, "$ref": "#/$defs/a"}`): checking any answer against it would apply the same
 * schema to the same value without end. The keys to the reference that closes it, or null.
 */
export function findLoop(root: unknown): string[] | null {
  // From every schema an answer can meet: a loop under a property is met by that property's value.
  return findCycle(root, (keyword) => IN_PLACE.has(keyword), reachableSchemas)
}

/**
 * The first cycle of references, following only subschemas under keywords `follows` takes, from
 * the schemas `starts` names (the root alone by default).
 */
function findCycle(
  root: unknown,
  follows: (keyword: string) => boolean,
  starts: (index: SchemaIndex) => string[] = () => [''],
): string[] | null {
  if (!isNode(root)) return null
  const index = indexSchema(root)
  const edges = new Map<string, { site: string[]; target: string }[]>()
  const referencesUnder = (pointer: string) => {
    let found = edges.get(pointer)
    if (!found) {
      found = []
      collectReferences(index.nodes.get(pointer)!, { into: found, index, follows })
      edges.set(pointer, found)
    }
    return found
  }
  // Depth-first from the root; a reference to a schema still being expanded is a cycle.
  const expanding = new Set<string>()
  const done = new Set<string>()
  const visit = (pointer: string): string[] | null => {
    expanding.add(pointer)
    for (const { site, target } of referencesUnder(pointer)) {
      if (expanding.has(target)) return site
      if (done.has(target)) continue
      const found = visit(target)
      if (found) return found
    }
    expanding.delete(pointer)
    done.add(pointer)
    return null
  }
  for (const start of starts(index)) {
    const found = done.has(start) ? null : visit(start)
    if (found) return found
  }
  return null
}

/** Every schema an answer can meet: the root, the schemas under it, and those references reach. */
function reachableSchemas(index: SchemaIndex): string[] {
  const seen = new Set<string>()
  const pending = ['']
  const walk = (at: Located) => {
    if (seen.has(at.pointer)) return
    seen.add(at.pointer)
    for (const keyword of REFERENCE_KEYWORDS) {
      const target = referenceTarget(at.node, keyword, index)
      if (target !== null) pending.push(target)
    }
    for (const next of subschemas(at, false)) walk(next)
  }
  for (let pointer = pending.pop(); pointer !== undefined; pointer = pending.pop()) {
    const at = index.nodes.get(pointer)
    if (at) walk(at)
  }
  return [...seen]
}

function isNode(value: unknown): value is Node {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const encodeSegment = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1')

/** The schemas directly inside one; `definitions`: whether those under $defs count. */
function* subschemas(at: Located, definitions: boolean): Generator<Located> {
  const child = (node: unknown, keys: string[]): Located[] => {
    if (Array.isArray(node)) return node.flatMap((item, i) => child(item, [...keys, String(i)]))
    if (!isNode(node)) return []
    const pointer = at.pointer + keys.map((k) => `/${encodeSegment(k)}`).join('')
    return [{ node, path: [...at.path, ...keys], pointer }]
  }
  for (const [key, value] of Object.entries(at.node)) {
    if (DATA_KEYWORDS.has(key)) continue
    if (!definitions && DEFINITION_KEYWORDS.has(key)) continue
    if (MAP_KEYWORDS.has(key) && isNode(value)) {
      for (const [name, schema] of Object.entries(value)) yield* child(schema, [key, name])
    } else yield* child(value, [key])
  }
}

interface SchemaIndex {
  nodes: Map<string, Located>
  /** `$anchor`, `$dynamicAnchor` and draft-07's `"$id": "#name"` → pointer. */
  anchors: Map<string, string>
  /** A subschema's `$id` → pointer. */
  ids: Map<string, string>
}

/** Every schema in the schema by its JSON pointer, with anchors and ids. */
function indexSchema(root: Node): SchemaIndex {
  const index: SchemaIndex = { nodes: new Map(), anchors: new Map(), ids: new Map() }
  const walk = (at: Located) => {
    index.nodes.set(at.pointer, at)
    for (const key of ['$anchor', '$dynamicAnchor'] as const) {
      const anchor = at.node[key]
      if (typeof anchor === 'string') index.anchors.set(anchor, at.pointer)
    }
    const id = at.node.$id
    if (typeof id === 'string') {
      if (id.startsWith('#')) index.anchors.set(id.slice(1), at.pointer)
      else index.ids.set(id.replace(/#$/, ''), at.pointer)
    }
    for (const next of subschemas(at, true)) walk(next)
  }
  walk({ node: root, path: [], pointer: '' })
  return index
}

/** The pointer a reference names inside this schema, or null (external, or nothing there). */
function resolve(reference: string, index: SchemaIndex): string | null {
  const hash = reference.indexOf('#')
  const base = hash < 0 ? reference : reference.slice(0, hash)
  const fragment = hash < 0 ? '' : reference.slice(hash + 1)
  let start = ''
  if (base !== '') {
    const at = index.ids.get(base)
    if (at === undefined) return null
    start = at
  }
  if (fragment === '') return start
  if (!fragment.startsWith('/')) return base === '' ? (index.anchors.get(fragment) ?? null) : null
  let pointer: string
  try {
    pointer = start + decodeURIComponent(fragment)
  } catch {
    return null
  }
  return index.nodes.has(pointer) ? pointer : null
}

/** The pointer a schema's `keyword` reference names inside the schema, or null. */
function referenceTarget(node: Node, keyword: string, index: SchemaIndex): string | null {
  const reference = node[keyword]
  if (typeof reference !== 'string') return null
  // $recursiveRef is always "#": the root (no $recursiveAnchor scopes are followed).
  return resolve(keyword === '$recursiveRef' ? '#' : reference, index)
}

/**
 * The references in a schema and in the subschemas its instance reaches without one (its
 * definitions are reached only by reference, so they are not part of it).
 */
function collectReferences(
  at: Located,
  walk: {
    into: { site: string[]; target: string }[]
    index: SchemaIndex
    follows: (keyword: string) => boolean
  },
) {
  for (const keyword of REFERENCE_KEYWORDS) {
    const target = referenceTarget(at.node, keyword, walk.index)
    if (target !== null) walk.into.push({ site: [...at.path, keyword], target })
  }
  for (const next of subschemas(at, false))
    if (walk.follows(next.path[at.path.length]!)) collectReferences(next, walk)
}
