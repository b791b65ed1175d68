/**
 * The route pattern a request path matched (`/v1/batches/:id` for `/v1/batches/b_1`), found in
 * the app's route table by the logger after the answer, instead of by a global hook on every
 * route: a global hook makes Elysia run hook code in every handler, logged or not.
 *
 * A trie of path segments: a static segment wins over `:param`, which wins over `*`, the order
 * Elysia's router matches in. Built once, from the routes as they are at the first lookup.
 */
export interface RouteEntry {
  method: string
  path: string
}

interface Node {
  statics: Map<string, Node>
  param: Node | null
  /** Patterns that end here, by method ('ALL' for any). */
  ends: Map<string, string>
  /** Patterns ending in `*` below this node, by method. */
  wildcard: Map<string, string>
}

const node = (): Node => ({ statics: new Map(), param: null, ends: new Map(), wildcard: new Map() })

export type RouteMatcher = (method: string, path: string) => string | null

export function routeMatcher(routes: () => readonly RouteEntry[]): RouteMatcher {
  let root: Node | null = null
  return (method, path) => {
    root ??= buildTrie(routes())
    return find(root, segmentsOf(path), 0, method)
  }
}

function buildTrie(routes: readonly RouteEntry[]): Node {
  const root = node()
  for (const { method, path } of routes) {
    const segments = segmentsOf(path)
    const wildcard = segments.at(-1) === '*'
    let at = root
    for (const segment of wildcard ? segments.slice(0, -1) : segments) {
      if (segment.startsWith(':')) at = at.param ??= node()
      else {
        let next = at.statics.get(segment)
        if (!next) at.statics.set(segment, (next = node()))
        at = next
      }
    }
    ;(wildcard ? at.wildcard : at.ends).set(method, path)
  }
  return root
}

function find(at: Node, segments: string[], index: number, method: string): string | null {
  if (index === segments.length) {
    const ended = byMethod(at.ends, method)
    if (ended) return ended
  } else {
    const segment = segments[index]!
    const fixed = at.statics.get(segment)
    const found =
      (fixed && find(fixed, segments, index + 1, method)) ||
      (at.param && segment !== '' && find(at.param, segments, index + 1, method))
    if (found) return found
  }
  return byMethod(at.wildcard, method)
}

const byMethod = (patterns: Map<string, string>, method: string) =>
  patterns.get(method) ??
  (method === 'HEAD' ? patterns.get('GET') : undefined) ??
  patterns.get('ALL') ??
  null

/** `/v1/batches/b_1/` → ['v1', 'batches', 'b_1']: a trailing slash matches as Elysia's router does, without it. */
function segmentsOf(path: string): string[] {
  const end = path.length > 1 && path.endsWith('/') ? path.length - 1 : path.length
  return path.slice(1, end).split('/')
}
