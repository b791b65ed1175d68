/**
 * The import graph of the source tree, read by Bun's transpiler (a real parser, so an import
 * spread over several lines is seen like any other), and the two checks made on it: imports
 * that run up the layer order, and import cycles. The checks take a plain map of path → code, so
 * a test can run them over a made-up tree as well as over the real one. A worker started with
 * `new URL('./x.ts', import.meta.url)` is no import and is not seen; each sits beside its parent.
 */
import { Glob } from 'bun'
import { dirname, join, normalize } from 'node:path'

/** One import: `from` imports `to`, both paths relative to the repository root. */
export interface ImportEdge {
  from: string
  to: string
  /** `import type …` and friends: erased at build time, but still a dependency of the design. */
  typeOnly: boolean
}

/** A layer: its name and the path prefixes (a folder ending in `/`, or a file) that belong to it. */
export interface Layer {
  name: string
  paths: string[]
}

export interface LayerViolation {
  from: string
  to: string
  /** `src/upstream (upstream) → src/dispatch (dispatch)`, for the failure message. */
  why: string
}

const transpiler = new Bun.Transpiler({ loader: 'ts' })

// The transpiler drops type-only imports, as TypeScript does when it compiles. To keep them in
// the graph, each such statement is first turned into a bare import of the same file (which the
// transpiler keeps and which declares no name, so nothing can clash).
const TYPE_STATEMENT =
  /\b(?:import|export)\s+type\s+(?=[{*]|[\w$]+\s+from\b)[^'"]*?\bfrom\s*(['"][^'"]+['"])/g
const BRACED_IMPORT = /\bimport\s*\{([^}]*)\}\s*from\s*(['"][^'"]+['"])/g

function withTypeImportsVisible(code: string): string {
  return code
    .replace(/^#!.*/, '') // a script's shebang line is not TypeScript
    .replace(TYPE_STATEMENT, 'import $1;')
    .replace(BRACED_IMPORT, (statement, names: string, path: string) => {
      const specifiers = names
        .split(',')
        .map((name) => name.trim())
        .filter(Boolean)
      return specifiers.length > 0 && specifiers.every((name) => name.startsWith('type '))
        ? `import ${path};`
        : statement
    })
}

/** The relative import paths of one file's code, each marked type-only or not. */
export function importsOf(code: string): { path: string; typeOnly: boolean }[] {
  const runtime = new Set(
    transpiler.scanImports(code.replace(/^#!.*/, '')).map((found) => found.path),
  )
  const all = new Set(
    transpiler.scanImports(withTypeImportsVisible(code)).map((found) => found.path),
  )
  return [...all]
    .filter((path) => path.startsWith('./') || path.startsWith('../'))
    .map((path) => ({ path, typeOnly: !runtime.has(path) }))
}

/** Every relative import of every file in `files` (path → code), resolved to a root-relative path. */
export function importGraph(files: Record<string, string>): ImportEdge[] {
  const edges: ImportEdge[] = []
  for (const [from, code] of Object.entries(files)) {
    for (const { path, typeOnly } of importsOf(code)) {
      edges.push({ from, to: normalize(join(dirname(from), path)), typeOnly })
    }
  }
  return edges
}

/** Reads the files matching `patterns` under `root` into a path → code map. */
export async function readTree(root: string, patterns: string[]): Promise<Record<string, string>> {
  const files: Record<string, string> = {}
  for (const pattern of patterns) {
    for await (const file of new Glob(pattern).scan({ cwd: root })) {
      files[file] = await Bun.file(join(root, file)).text()
    }
  }
  return files
}

/** The index of the layer `path` belongs to (the longest matching prefix wins), or -1. */
export function layerOf(path: string, layers: Layer[]): number {
  let best = -1
  let bestLength = -1
  layers.forEach((layer, index) => {
    for (const prefix of layer.paths) {
      const matches = prefix.endsWith('/') ? path.startsWith(prefix) : path === prefix
      if (matches && prefix.length > bestLength) {
        best = index
        bestLength = prefix.length
      }
    }
  })
  return best
}

/** Files of the tree that no layer claims. */
export function unplaced(files: Record<string, string>, layers: Layer[]): string[] {
  return Object.keys(files)
    .filter((file) => layerOf(file, layers) < 0)
    .sort()
}

/**
 * Imports that run up the order: a file may import only from its own layer or lower ones. An
 * import of a path no layer claims (test/, bench/, a typo) counts too.
 */
export function layerViolations(edges: ImportEdge[], layers: Layer[]): LayerViolation[] {
  const violations: LayerViolation[] = []
  for (const { from, to } of edges) {
    const own = layerOf(from, layers)
    const target = layerOf(to, layers)
    if (own < 0 || (target >= 0 && target <= own)) continue
    const where = (index: number) => (index < 0 ? 'no layer' : layers[index].name)
    violations.push({ from, to, why: `${from} (${where(own)}) → ${to} (${where(target)})` })
  }
  return violations.sort((a, b) => a.why.localeCompare(b.why))
}

/** Every import cycle, each as the files around it (the strongly connected components of size > 1). */
export function importCycles(edges: ImportEdge[]): string[][] {
  const next = new Map<string, string[]>()
  for (const { from, to } of edges) {
    if (from === to) continue
    next.set(from, [...(next.get(from) ?? []), to])
  }
  // Tarjan's algorithm, iterative so a deep graph cannot overflow the stack.
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const onStack = new Set<string>()
  const stack: string[] = []
  const cycles: string[][] = []
  let counter = 0
  const nodes = new Set([...next.keys(), ...[...next.values()].flat()])
  for (const root of nodes) {
    if (index.has(root)) continue
    const work: { node: string; child: number }[] = [{ node: root, child: 0 }]
    index.set(root, counter)
    low.set(root, counter++)
    stack.push(root)
    onStack.add(root)
    while (work.length > 0) {
      const frame = work[work.length - 1]
      const children = next.get(frame.node) ?? []
      if (frame.child < children.length) {
        const child = children[frame.child++]
        if (!index.has(child)) {
          index.set(child, counter)
          low.set(child, counter++)
          stack.push(child)
          onStack.add(child)
          work.push({ node: child, child: 0 })
        } else if (onStack.has(child)) {
          low.set(frame.node, Math.min(low.get(frame.node)!, index.get(child)!))
        }
        continue
      }
      work.pop()
      if (work.length > 0) {
        const parent = work[work.length - 1].node
        low.set(parent, Math.min(low.get(parent)!, low.get(frame.node)!))
      }
      if (low.get(frame.node) === index.get(frame.node)) {
        const component: string[] = []
        let member: string
        do {
          member = stack.pop()!
          onStack.delete(member)
          component.push(member)
        } while (member !== frame.node)
        if (component.length > 1) cycles.push(component.sort())
      }
    }
  }
  return cycles
}
